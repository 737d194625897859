"""`coord chaos` refuses bad input clearly, before it starts anything or makes a run
directory, and `--check` re-checks a recorded oplog (exit 1 on a violation)."""

from __future__ import annotations

import json

from coord.cli.main import main
from tests.check.oplogs import H


def _text(capsys) -> str:
    """What was printed, with rich's line wrapping undone."""
    return " ".join(capsys.readouterr().err.split())


def test_unknown_workload_or_nemesis_is_a_clear_error(tmp_path, capsys):
    assert main(["chaos", "--workload", "register,nope", "--out", str(tmp_path / "a")]) == 2
    assert main(["chaos", "--nemesis", "kill,flood", "--out", str(tmp_path / "b")]) == 2
    assert main(["chaos", "--seconds", "0", "--out", str(tmp_path / "c")]) == 2
    assert main(["chaos", "--overlap", "--nemesis", "kill", "--out", str(tmp_path / "d")]) == 2
    err = _text(capsys)
    assert "unknown workload(s) nope; choose from register, set, own, pid, etcd" in err
    assert "unknown nemesis flood" in err and "--seconds must be > 0" in err
    assert "overlapping faults need two nemesis kinds or more" in err
    assert not any(tmp_path.iterdir())


def test_check_only_re_checks_an_oplog(tmp_path, capsys):
    good = H().op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=1)
    bad = H().op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=2)
    for name, h in (("good", good), ("bad", bad)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in h.sorted()))
    assert main(["chaos", "--check", str(tmp_path / "good.jsonl")]) == 0
    assert main(["chaos", "--check", str(tmp_path / "bad.jsonl")]) == 1
    assert "read of 2 (op" in _text(capsys)
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    assert main(["chaos", "--check", str(tmp_path / "broken.jsonl")]) == 2
    assert "broken.jsonl:1: not JSON" in _text(capsys)


def test_check_only_reads_the_oplog_of_a_run_killed_while_writing_a_row(tmp_path, capsys):
    """A harness killed mid-row leaves a last line with no newline: the rows before it
    are checked (here a stale read among them is caught) and the cut row is left out;
    a bad line that ends in a newline is still an error (the test above)."""
    bad = H().op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=2)
    rows = "".join(json.dumps(r) + "\n" for r in bad.sorted())
    (tmp_path / "oplog.jsonl").write_text(rows + '{"index": 9, "process": 4, "ty')
    assert main(["chaos", "--check", str(tmp_path / "oplog.jsonl")]) == 1
    assert "read of 2 (op" in _text(capsys)


def test_check_only_takes_the_linearizability_time_limit(tmp_path, capsys):
    """Ten concurrent writes and a read of a value none wrote: decided (illegal) under
    the default per-key limit, undecided (exit 3) under a limit of 0 s."""
    h = H()
    for p in range(10):
        h.op(p, "write", 1 + p, 100, p)
    h.op(99, "read", 200, 201, out=-1)
    path = tmp_path / "o.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in h.sorted()))
    assert main(["chaos", "--check", str(path)]) == 1
    assert main(["chaos", "--check", str(path), "--lin-time-limit", "0"]) == 3
    assert "time limit 0 s reached" in _text(capsys)


def test_nemesis_all_names_every_kind(tmp_path, capsys):
    """`--nemesis all` is every kind: delay among them, which cannot run with partitions
    forced into network namespaces, so the run refuses before any member starts."""
    assert main(["chaos", "--nemesis", "all", "--netns", "on", "--out",
                 str(tmp_path / "a")]) == 2
    assert "--nemesis delay holds messages in the TCP gates" in _text(capsys)
    assert not (tmp_path / "a" / "cluster").exists()


def test_an_error_naming_a_path_with_brackets_is_printed_as_it_is(tmp_path, capsys):
    """Rich reads `[bold]` as markup: a path holding it, in an error, is escaped."""
    missing = tmp_path / "[bold]run" / "oplog.jsonl"
    (tmp_path / "[bold]run").mkdir()
    (tmp_path / "[bold]run" / "faults.jsonl").write_text("{not json\n")
    assert main(["chaos", "--check", str(missing)]) == 2
    printed = "".join(capsys.readouterr().err.split())  # however rich folded the path
    assert "[bold]run/faults.jsonl" in printed
