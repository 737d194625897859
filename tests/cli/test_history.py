"""`coord history synth` and `coord audit`'s refusals (no JVM is started for bad input)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from coord.cli.main import main
from coord.history.sink import committed_files


def test_synth_writes_a_history_and_will_not_write_over_one(tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["history", "synth", "--commands", "500", "--seed", "4", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["last_index"] == 500 and report["rows"] > 500
    assert committed_files(out)[0] == "parquet"
    assert main(["history", "synth", "--commands", "500", "--out", str(out)]) == 2
    assert "already holds a history" in capsys.readouterr().err
    assert main(["history", "synth", "--commands", "0", "--out", str(tmp_path / "z")]) == 2


def _writers_into(out: Path) -> list[int]:
    """Pids of the Parquet-writer processes writing under `out`."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if b"coord.history.parquet_process" in args and any(
                a.startswith(str(out).encode()) for a in args):
            pids.append(int(cmdline.parent.name))
    return pids


def test_synth_killed_while_it_writes_can_be_run_again_into_the_same_directory(tmp_path,
                                                                               capsys):
    """kill -9 of a synth while it writes its first run leaves the lock and its
    `_tmp-RUN/` (nothing committed, no manifest): the same command then runs again into
    the same --out, and the dead run's files go."""
    out = tmp_path / "h"
    argv = [sys.executable, "-m", "coord", "history", "synth", "--out", str(out)]
    synth = subprocess.Popen([*argv, "--commands", "5000000"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(p.rglob("*.parquet") for p in out.glob("_tmp-*")):
            assert synth.poll() is None and time.monotonic() < deadline, "no Parquet in 60 s"
            time.sleep(0.1)
    finally:
        synth.kill()
        synth.wait(30)
    # its Parquet writer, a process of its own, sees the pipe close and stops
    deadline = time.monotonic() + 30
    while _writers_into(out):
        assert time.monotonic() < deadline, "the dead synth's Parquet writer still runs"
        time.sleep(0.1)
    (dead,) = out.glob("_tmp-*")
    assert main(["history", "synth", "--commands", "300", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["last_index"] == 300
    assert not dead.exists() and committed_files(out)[0] == "parquet"


def test_synth_with_a_sink_log_writes_both_and_will_not_write_over_one(tmp_path, capsys):
    out, sink = tmp_path / "h", tmp_path / "sink"
    argv = ["history", "synth", "--sink-rows", "200", "--sink-log", str(sink), "--out"]
    assert main([*argv, str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sink_rows"] >= 200 and report["published"] > 0
    assert committed_files(out)[0] == "parquet"
    assert sorted(p.name for p in sink.iterdir()) == ["refusals.parquet", "sink_log.parquet"]
    assert main([*argv, str(tmp_path / "h2")]) == 2
    assert "already holds a sink log" in capsys.readouterr().err
    assert main(["history", "synth", "--sink-rows", "200", "--out", str(tmp_path / "z")]) == 2
    assert "go together" in capsys.readouterr().err


def test_audit_refuses_a_directory_that_is_not_a_history(tmp_path, capsys):
    assert main(["audit", str(tmp_path)]) == 2
    assert "not a coord history directory" in capsys.readouterr().err


def test_audit_refuses_a_sink_log_directory_without_a_finished_export(tmp_path, capsys):
    history, sink = tmp_path / "h", tmp_path / "sink"
    assert main(["history", "synth", "--commands", "20", "--out", str(history)]) == 0
    capsys.readouterr()
    sink.mkdir()
    (sink / "refusals.parquet").write_bytes(b"")  # an export cut off before its log
    assert main(["audit", str(history), "--sink-log", str(sink)]) == 2
    err = capsys.readouterr().err
    assert "no sink_log.parquet" in err and "not a finished export" in err
