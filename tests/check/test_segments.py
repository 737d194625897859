"""coord.check.linearizable's split search (coord.check.segments): a key's history cut
at quiescent points and searched segment by segment gives the verdict of the search of
the whole history, carrying the register's value and the unknown-outcome writes still
pending across each cut, and decides long histories the whole search cannot."""

from __future__ import annotations

import random

from coord.check.linearizable import check_key
from coord.check.segments import NEVER, forget_times, segments
from tests.check.oplogs import H


def test_a_stale_read_in_a_later_segment_than_the_overwrite_is_caught():
    """The value at the cut is carried: 1 was overwritten by 2 segments before the read
    of 1, whatever the register held before the oplog."""
    h = H().op(0, "write", 1, 2, 2).op(1, "read", 4, 5, out=2).op(1, "read", 7, 8, out=1)
    r = check_key(h.sorted(), initial=1)
    assert r.verdict == "illegal"
    assert "read of 1" in r.anomaly["message"] and r.anomaly["state"] == 2
    assert "at best 2 of 3 ops" in r.anomaly["message"]
    assert r.anomaly["op"][0]["time_ns"] == 7
    h = H().op(0, "write", 1, 2, 1).op(0, "write", 3, 4, 2).op(1, "read", 6, 7, out=1)
    assert check_key(h.sorted()).verdict == "illegal"


def test_an_unknown_write_carried_across_cuts_may_take_effect_late():
    """The write of 5 (no answer) is invoked before 6 is written and read; 5 is read
    two cuts later: it took effect after the read of 6."""
    h = H().op(0, "write", 1, None, 5).op(1, "write", 2, 3, 6).op(1, "read", 4, 5, out=6)
    h.op(2, "read", 7, 8, out=5)
    assert len(segments(_calls(h))) == 3
    r = check_key(h.sorted())
    assert (r.verdict, r.reason) == ("ok", "")


def test_a_carried_unknown_write_takes_effect_at_most_once():
    """5 read after 6 (the unknown write took effect late), then 7 written and 5 read
    again: the write of 5 would have to take effect twice."""
    h = H().op(0, "write", 1, None, 5).op(1, "write", 2, 3, 6).op(1, "read", 4, 5, out=5)
    h.op(1, "write", 6, 7, 7).op(2, "read", 9, 10, out=5)
    assert len(segments(_calls(h))) == 4
    r = check_key(h.sorted())
    assert r.verdict == "illegal" and "read of 5" in r.anomaly["message"]
    assert r.anomaly["state"] == 7


def test_an_unknown_write_nothing_reads_afterwards_is_left_out():
    h = H().op(1, "read", 1, 2, out=5).op(2, "write", 3, None, 5).op(3, "write", 4, None, 6)
    h.op(1, "read", 5, 9, out=6)
    forget = forget_times(_calls(h))
    assert sorted(forget.values()) == [NEVER, 9]


def test_an_unknown_write_an_unknown_cas_swaps_from_is_never_forgotten():
    """Nothing known reads 5, but the unknown cas 5 -> 7 may swap from it later, and 7 is
    read two cuts on: the write of 5 and the cas both took effect late."""
    h = H().op(0, "write", 1, 2, 1).op(1, "write", 3, None, 5).op(2, "cas", 4, None, [5, 7])
    h.op(0, "read", 5, 6, out=1).op(0, "read", 10, 11, out=7)
    assert check_key(h.sorted()).verdict == "ok"
    assert check_key(h.sorted(), split=False).verdict == "ok"


def test_a_long_history_the_whole_search_cannot_decide_is_decided_in_segments():
    """Thousands of ops in short concurrent groups with a quiescent point after each;
    every 40th group an unknown-outcome write nobody reads (each doubles the whole
    search's linearized sets) and one the next group reads; an unknown-outcome write in
    the first group read only at the end (it took effect late), or a stale read."""
    for stale in (False, True):
        h = _long_history(stale)
        assert check_key(h.sorted(), max_states=20_000, split=False).verdict == "unknown"
        r = check_key(h.sorted(), max_states=20_000)
        assert r.ops > 2000
        assert r.verdict == ("illegal" if stale else "ok"), r.reason


def _long_history(stale: bool) -> H:
    h = H().op(999, "write", 0, None, 999_999)
    t = 1
    value = 0
    for g in range(1000):
        value += 1
        h.op(0, "write", t, t + 3, value).op(1, "read", t + 1, t + 4, out=value)
        if g % 40 == 0:
            h.op(1000 + g, "write", t + 2, None, -g)
        if g % 40 == 20:
            h.op(1000 + g, "write", t + 2, None, 10_000 + g)
            h.op(4, "read", t + 10, t + 11, out=10_000 + g)  # read in the next group
            h.op(5, "write", t + 12, t + 13, value)  # and overwritten again there
        t += 10
    h.op(1, "read", t, t + 1, out=value - 1 if stale else 999_999)
    return h


def _calls(h: H):
    from coord.check.linearizable import _calls as calls_of
    from coord.check.oplog import pair

    calls = calls_of(pair(h.sorted()))
    for i, c in enumerate(calls):
        c.id = i
    return calls


# -- split and whole agree -----------------------------------------------------------------


def _random_segmented(rng: random.Random) -> H:
    """A few groups of overlapping ops with quiescent gaps between them, over a few
    values, with unknown-outcome writes and cas that may be read in later groups."""
    h = H()
    t = 0
    proc = 0
    for _ in range(rng.randint(1, 4)):
        for _ in range(rng.randint(1, 3)):
            f = rng.choice(["read", "write", "write", "cas"])
            start = t + rng.randint(0, 3)
            end = start + rng.randint(1, 4)
            status = rng.choice(["ok", "ok", "ok", "info", "fail"])
            proc += 1
            if f == "read":
                h.op(proc, f, start, end, status=status, out=rng.choice([None, 1, 2, 3]))
                continue
            value = rng.randint(1, 3) if f == "write" else [rng.choice([None, 1, 2, 3]),
                                                            rng.randint(1, 3)]
            h.op(proc, f, start, None if status == "info" else end, value, status=status)
        t += 10
    return h


def test_the_split_search_agrees_with_the_whole_search_on_random_oplogs():
    rng = random.Random(33)
    verdicts = {"ok": 0, "illegal": 0}
    for n in range(2000):
        h = _random_segmented(rng)
        whole = check_key(h.sorted(), split=False)
        split = check_key(h.sorted())
        assert "unknown" not in (whole.verdict, split.verdict)
        assert split.verdict == whole.verdict, (n, h.sorted())
        verdicts[split.verdict] += 1
    assert min(verdicts.values()) > 200, verdicts  # both outcomes well exercised
