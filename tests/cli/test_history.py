"""`coord history synth` and `coord audit`'s refusals (no JVM is started for bad input)."""

from __future__ import annotations

import json

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
