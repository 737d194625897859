"""Reads that promised no recency (serializable, or read-only): a stale value is
allowed; a value never written, only sent by a write that failed, or from a write that
began after the read completed is a violation, and the linearizability check leaves
such reads out."""

from __future__ import annotations

import pytest

from coord.check import check_all
from coord.check.registers import check_registers
from coord.check.stale_reads import check_stale_reads
from tests.check.oplogs import H


def _history() -> H:
    """Writes of 1 then 2 (acknowledged one after the other), a cas 2 -> 3 whose compare
    failed, and a put of 4 that begins at 20."""
    h = H().op(0, "write", 1, 2, 1).op(0, "write", 3, 4, 2)
    h.op(0, "cas", 5, 6, [1, 3], status="fail")
    return h.op(0, "write", 20, 21, 4)


@pytest.mark.parametrize("flag", ["serializable", "read_only"])
def test_a_stale_read_that_promised_no_recency_is_accepted_and_counted(flag):
    h = _history().op(1, "read", 7, 8, out=1, **{flag: True})  # 1 was overwritten by 2
    h.op(2, "read", 9, 10, out=None, **{flag: True})  # absent: the state before any write
    r = check_stale_reads(h.sorted())
    assert r.ok, r.violations
    assert r.stats == {"reads": 2, "certainly_stale": 1}
    # the same read unflagged is a linearizability violation; flagged it is left out
    assert check_registers(h.sorted()).ok
    unflagged = _history().op(1, "read", 7, 8, out=1)
    assert not check_registers(unflagged.sorted()).ok


@pytest.mark.parametrize(("out", "why"), [
    (9, "which no write sent"),
    (3, "which only a write that failed sent"),
    (4, "from a write that began after the read completed"),
])
def test_a_read_that_promised_no_recency_returning_what_the_key_never_held(out, why):
    h = _history().op(1, "read", 7, 8, out=out, serializable=True)
    r = check_stale_reads(h.sorted())
    assert r.count == 1, r.violations
    assert r.violations[0]["message"] == (
        f"key 'k': a read that promised no recency returned {out}, {why}")
    assert r.violations[0]["ops"][0][1]["value"] == out


def test_a_read_concurrent_with_the_write_it_returns_is_not_from_the_future():
    h = _history().op(1, "read", 19, 20, out=4, serializable=True)  # 4's write began at 20
    h.op(1, "read", 22, 23, out=4, serializable=True)
    h.op(2, "write", 24, None, 5).op(3, "read", 25, 26, out=5, serializable=True)  # unknown
    assert check_stale_reads(h.sorted()).ok


def test_check_all_runs_the_stale_reads_check_on_reads():
    h = _history().op(1, "read", 7, 8, out=9, serializable=True)
    verdicts = {c.checker: c.verdict for c in check_all(h.sorted())}
    assert verdicts == {"linearizable": "ok", "stale-reads": "illegal"}
