"""The run's report: report.html and timeline.png written into the run directory from
the oplog, the faults and the checkers' results, naming the seed, the replay command
and each violation (here a planted one) with the time of the row that shows it."""

from __future__ import annotations

import re

from coord.chaos.report import violation_marks, write_report
from coord.check.result import CheckResult
from tests.check.oplogs import H

S = 1_000_000_000


def _rows() -> list[dict]:
    h = H()
    for n in range(40):
        h.op(n % 4, "write", n * S // 10, n * S // 10 + 5_000_000, n, worker=n % 4)
    h.op(9, "read", 2 * S, 2 * S + 9_000_000, status="info", worker=9)
    return h.sorted()


def test_the_report_names_the_seed_the_replay_and_a_planted_violation(tmp_path):
    rows = _rows()
    planted = CheckResult("linearizable")
    planted.violation("planted: a read of 'k' saw 99, which nobody wrote", rows=[rows[21]])
    faults = [{"kind": "kill", "member": "n2", "start_s": 1.0, "end_s": 2.5, "note": "",
               "error": "", "start_ns": S, "end_ns": 5 * S // 2}]
    page = write_report(tmp_path, "illegal", 42, "coord chaos --seed 42", rows, faults,
                        [planted, CheckResult("stale-reads", stats={"reads": 1})])
    text = page.read_text()
    assert page == tmp_path / "report.html"
    assert "seed 42" in text and "<code>coord chaos --seed 42</code>" in text
    assert "planted: a read of &#x27;k&#x27; saw 99" in text
    at = f"{(rows[21]['time_ns'] - rows[0]['time_ns']) / S:.3f}"
    assert re.search(rf"<td>linearizable</td><td>{at}</td>", text), at
    assert "<td>kill</td><td>n2</td>" in text
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert 'src="data:image/png;base64,' in text


def test_a_violation_is_placed_at_its_earliest_row_however_deeply_nested():
    c = CheckResult("x")
    c.violation("m", ops=[[{"time_ns": 30}, {"time_ns": 40}]], anomaly={"op": [{"time_ns": 20}]})
    c.violation("no rows")
    assert list(violation_marks([c])) == [("x", "m", 20), ("x", "no rows", None)]


def test_a_run_that_recorded_nothing_still_gets_its_report(tmp_path):
    """A run whose cluster never served (no oplog rows) and whose one fault never healed:
    the page says so rather than the run failing after its checks."""
    fault = {"kind": "pause", "member": "n1", "start_s": 0.5, "end_s": None, "note": "",
             "error": "", "start_ns": 5, "end_ns": 0}
    text = write_report(tmp_path, "unknown", 3, "coord chaos --seed 3", [], [fault],
                        []).read_text()
    assert "seed 3" in text and "<td>pause</td><td>n1</td>" in text
