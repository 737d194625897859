"""`coord audit --oplog`: per-key linearizability on Spark, a grouped pandas
wrapper over `coord.check.linearizable.check_key` — the same verdict per key as calling
it directly; a planted stale read is caught and cited with its window; a key whose rows
do not pair up is reported malformed, not guessed at."""

from __future__ import annotations

import json
import time

import pytest

from coord.check.linearizable import check_key
from coord.check.oplog import by_key
from coord.cli.main import main
from coord.history.sink import HistorySink
from coord.history.synth import synthesize

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


class Recorder:
    """Oplog rows as the chaos harness writes them (one host's clock)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.t = 1_000

    def event(self, process: int, type_: str, f: str, key: str, value, **extra) -> int:
        self.t += 10
        index = len(self.rows)
        self.rows.append({"index": index, "process": process, "type": type_, "f": f,
                          "key": key, "value": value, "time_ns": self.t, "error": None,
                          **extra})
        return index


def _oplog() -> tuple[list[dict], int]:
    """Keys: "clean" (concurrent writes and reads, linearizable), "stale" (a read of a
    value overwritten before the read began), "broken" (an ok with no invoke), plus a
    non-register op on a key (skipped). Returns the rows and the stale read's index."""
    h = Recorder()
    # clean: p1 writes 1 while p2 reads; the read may see either value
    h.event(1, "invoke", "write", "clean", 1)
    h.event(2, "invoke", "read", "clean", None)
    h.event(2, "ok", "read", "clean", 1)
    h.event(1, "ok", "write", "clean", 1)
    h.event(1, "invoke", "cas", "clean", [1, 2])
    h.event(1, "ok", "cas", "clean", [1, 2])
    h.event(2, "invoke", "read", "clean", None)
    h.event(2, "ok", "read", "clean", 2)
    h.event(3, "invoke", "own", "clean", None)  # not a register op: skipped
    h.event(3, "ok", "own", "clean", None)
    # stale: 1 then 2 written, both acknowledged; a later read returns 1
    h.event(1, "invoke", "write", "stale", 1)
    h.event(1, "ok", "write", "stale", 1)
    h.event(1, "invoke", "write", "stale", 2)
    h.event(1, "ok", "write", "stale", 2)
    stale = h.event(2, "invoke", "read", "stale", None)
    h.event(2, "ok", "read", "stale", 1)
    # broken: a completion with no invoke
    h.event(4, "ok", "write", "broken", 7)
    return h.rows, stale


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("clients")
    HistorySink(root / "log").write(synthesize(200, seed=3))
    rows, stale = _oplog()
    path = root / "clients.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "log", path, rows, stale


class _Shared:
    """The run's SparkSession for the command, which stops its own at the end."""

    def __init__(self, spark) -> None:
        self._spark = spark

    def __getattr__(self, name):
        return getattr(self._spark, name)

    def stop(self) -> None:
        pass


def test_each_key_gets_check_keys_verdict_and_the_stale_read_is_cited(
        inputs, tmp_path, capsys, spark, monkeypatch):
    log, path, rows, stale = inputs
    assert main(["audit", str(log), "--oplog", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err  # refused before Spark starts
    monkeypatch.setattr("coord.audit.spark.session", lambda *a, **k: _Shared(spark))
    assert main(["audit", str(log), "--oplog", str(path), "--checks",
                 "log.gap_free", "--json"]) == 1  # an illegal key is a violation
    summary = json.loads(capsys.readouterr().out)
    c = summary["clients"]
    assert (c["keys"], c["ok"], c["illegal"], c["unknown"], c["malformed"]) == (3, 1, 1, 0, 1)
    assert [(u["key"], u["verdict"]) for u in c["undecided"]] == [("broken", "malformed")]
    assert summary["checks"]["clients.linearizable"]["violations"] == 1
    assert summary["checks"]["log.gap_free"]["violations"] == 0
    [v] = summary["examples"]
    assert v["check"] == "clients.linearizable"
    assert v["index"] == stale and v["subject"] == "key stale"
    # the wrapper adds nothing: each key's verdict and message are check_key's own
    keys = by_key(rows)
    direct = check_key(keys["stale"])
    assert direct.verdict == "illegal" and v["detail"] == direct.anomaly["message"]
    assert check_key(keys["clean"]).verdict == "ok"  # the one ok key
    cited = [json.loads(e) for e in v["evidence"]]
    assert cited[0]["index"] == stale and cited[1]["value"] == 1  # the read, then its ok


def _hard(key: str, writers: int, first_index: int) -> list[dict]:
    """A key whose search is exponential: `writers` concurrent writes, acknowledged after
    a read of a value none wrote returned (illegal, but only after trying every subset:
    at 22 writers the 2,000,000-state bound takes ~10 s here, so a shorter budget ends
    it). Acknowledged, not of unknown outcome: the search forgets an unknown write no op
    reads, and would see at once that nothing is left to explain the read."""
    rows: list[dict] = []
    t = 1_000

    def add(process: int, type_: str, f: str, value) -> None:
        nonlocal t
        t += 10
        rows.append({"index": first_index + len(rows), "process": process, "type": type_,
                     "f": f, "key": key, "value": value, "time_ns": t, "error": None})

    for p in range(writers):
        add(p, "invoke", "write", p)
    add(writers, "invoke", "read", None)
    add(writers, "ok", "read", -1)
    for p in range(writers):
        add(p, "ok", "write", p)
    return rows


def test_a_key_whose_search_begins_past_the_budget_is_unknown():
    import pandas as pd

    from coord.audit.clients import budget_reason, check_group

    rows, stale = _oplog()
    pdf = pd.DataFrame({"key": "stale", "line": [json.dumps(r) for r in rows
                                                 if r["key"] == "stale"]})
    past = check_group(pdf, 10.0, 1000, deadline=time.time() - 1, budget_s=2.0).iloc[0]
    assert (past["verdict"], past["reason"]) == ("unknown", budget_reason(2.0))
    assert past["states"] == 0  # never searched
    within = check_group(pdf, 10.0, 1000, deadline=time.time() + 60, budget_s=60.0).iloc[0]
    assert within["verdict"] == "illegal" and within["op_index"] == stale


def test_the_budget_bounds_the_whole_oplog_check(
        inputs, tmp_path, capsys, spark, monkeypatch):
    log = inputs[0]
    rows = [r for k in range(4) for r in _hard(f"hard{k}", 22, 1000 * k)]
    path = tmp_path / "hard.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["audit", str(log), "--oplog", str(path),
                 "--oplog-budget", "0"]) == 2
    assert "--oplog-budget must be positive" in capsys.readouterr().err
    assert main(["audit", str(log), "--oplog-budget", "5"]) == 2
    assert "--oplog-budget needs --oplog" in capsys.readouterr().err
    monkeypatch.setattr("coord.audit.spark.session", lambda *a, **k: _Shared(spark))
    assert main(["audit", str(log), "--oplog", str(path), "--checks",
                 "log.gap_free", "--oplog-budget", "1.5", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["clients"]
    assert c["budget_s"] == 1.5
    assert (c["keys"], c["unknown"], c["ok"], c["illegal"], c["malformed"]) == (4, 4, 0, 0, 0)
    # each search ended by the budget (begun before it ran out, or never begun), none by
    # its own 10 s limit or the state bound, which it would reach in ~10 s
    assert all(u["reason"].startswith("the oplog budget (1.5 s)")
               for u in c["undecided"]), c["undecided"]
