"""coord.check.linearizable: clean oplogs pass, planted violations are caught with
the offending op named, bounds give "unknown", and on thousands of small random
oplogs the search agrees with a brute force over every order."""

from __future__ import annotations

import itertools
import random

import pytest

from coord.check.linearizable import check_key
from coord.check.oplog import OplogError
from tests.check.oplogs import H


def test_a_sequential_oplog_is_linearizable():
    h = H().op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=1).op(0, "cas", 5, 6, [1, 2])
    h.op(1, "read", 7, 8, out=2)
    r = check_key(h.sorted())
    assert (r.verdict, r.ok, r.anomaly, r.ops, r.key) == ("ok", True, None, 4, "k")


def test_a_stale_read_is_caught_and_named():
    h = H().op(0, "write", 1, 2, 1).op(0, "write", 3, 4, 2).op(1, "read", 5, 6, out=1)
    r = check_key(h.sorted())
    assert (r.verdict, r.ok) == ("illegal", False)
    assert r.anomaly["op"][0]["f"] == "read" and r.anomaly["op"][1]["value"] == 1
    assert "read of 1" in r.anomaly["message"] and r.anomaly["state"] == 2


def test_a_read_of_a_write_recorded_as_failed_names_that_write():
    """What seed 103 of `coord chaos` showed: a write answered "not applied" whose value
    was read back afterwards."""
    h = H().op(0, "write", 1, 2, 1).op(0, "write", 3, 4, 2, status="fail")
    h.op(1, "read", 5, 6, out=2).op(1, "read", 7, 8, out=3)
    r = check_key(h.sorted())
    assert r.verdict == "illegal"
    assert r.anomaly["message"].endswith(
        "the value was written by write op 2 (recorded fail: planted)")
    assert [row["type"] for row in r.anomaly["written_by"][0]] == ["invoke", "fail"]
    h2 = H().op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=3)
    assert check_key(h2.sorted()).anomaly["message"].endswith(
        "nothing in the oplog wrote that value")


def test_a_lost_acknowledged_write_is_caught():
    h = H().op(0, "write", 1, 2, "a").op(1, "read", 3, 4, out=None)
    r = check_key(h.sorted())
    assert r.verdict == "illegal" and "read of absent" in r.anomaly["message"]


def test_a_read_concurrent_with_a_write_may_see_either_value():
    for seen in (None, 7):
        h = H().op(0, "write", 1, 10, 7).op(1, "read", 2, 5, out=seen)
        assert check_key(h.sorted()).ok, seen


def test_a_value_read_before_it_was_written_is_caught():
    h = H().op(1, "read", 1, 2, out=7).op(0, "write", 3, 4, 7)
    assert check_key(h.sorted()).verdict == "illegal"


def test_an_unknown_write_may_or_may_not_have_happened_but_only_after_its_invoke():
    took = H().op(0, "write", 1, None, 5).op(1, "read", 10, 11, out=5)
    never = H().op(0, "write", 1, 2, 5, status="info").op(1, "read", 10, 11, out=None)
    assert check_key(took.sorted()).ok and check_key(never.sorted()).ok
    early = H().op(1, "read", 1, 2, out=5).op(0, "write", 3, None, 5)
    assert check_key(early.sorted()).verdict == "illegal"


def test_an_unknown_write_cannot_flip_back_and_forth():
    """It happens at most once: 5, then the other write's 6, then 5 again is illegal."""
    h = H().op(0, "write", 1, None, 5).op(1, "write", 2, 3, 6)
    h.op(2, "read", 4, 5, out=5).op(2, "read", 6, 7, out=6).op(2, "read", 8, 9, out=5)
    assert check_key(h.sorted()).verdict == "illegal"


def test_failed_ops_did_nothing():
    h = H().op(0, "write", 1, 2, 1).op(1, "cas", 3, 4, [9, 2], status="fail")
    h.op(0, "write", 5, 6, 3, status="fail").op(1, "read", 7, 8, out=1)
    assert check_key(h.sorted()).ok
    h.op(1, "read", 9, 10, out=2)
    assert check_key(h.sorted()).verdict == "illegal"


def test_a_cas_that_swapped_from_a_value_the_register_never_held_is_caught():
    h = H().op(0, "write", 1, 2, 1).op(1, "cas", 3, 4, [2, 3])
    r = check_key(h.sorted())
    assert r.verdict == "illegal" and "cas 2 -> 3" in r.anomaly["message"]


def test_an_add_is_a_write_to_its_fresh_key():
    h = H().op(0, "add", 1, 2, "v").op(1, "read", 3, 4, out="v")
    assert check_key(h.sorted()).ok
    h.op(1, "read", 5, 6, out=None)
    assert check_key(h.sorted()).verdict == "illegal"


def test_the_initial_value_and_json_values():
    h = H().op(0, "read", 1, 2, out=[1, {"a": 2}]).op(0, "cas", 3, 4, [[1, {"a": 2}], "x"])
    assert check_key(h.sorted(), initial=[1, {"a": 2}]).ok
    assert check_key(h.sorted()).verdict == "illegal"


def test_bounds_give_unknown_not_a_guess():
    """Many concurrent writes and a read no order explains: the search must explore
    2^n subsets; a small state bound stops it with "unknown"."""
    h = H()
    for p in range(14):
        h.op(p, "write", 1 + p, 100, p)
    h.op(99, "read", 200, 201, out=-1)
    r = check_key(h.sorted(), max_states=500)
    assert (r.verdict, r.ok, r.anomaly) == ("unknown", False, None)
    assert "state bound 500" in r.reason
    r = check_key(h.sorted(), time_limit_s=0.0)
    assert r.verdict == "unknown" and "time limit" in r.reason


def test_malformed_oplogs_are_refused_clearly():
    h = H().op(0, "write", 1, None, 1).op(0, "write", 2, 3, 2)
    with pytest.raises(OplogError, match="invoked while its op"):
        check_key(h.rows)
    r = check_key(H().op(0, "init_producer", 1, 2).op(1, "read", 3, 4, out=None).rows)
    assert (r.ok, r.ops, r.skipped) == (True, 1, 2)  # other functions on the key: skipped
    with pytest.raises(OplogError, match=r"cas value must be \[old, new\]"):
        check_key(H().op(0, "cas", 1, 2, 5).rows)


# -- against a brute force ---------------------------------------------------------------


def _brute(h: H) -> bool:
    """Every subset of unknown-outcome ops, every order consistent with real time."""
    from coord.check.oplog import pair

    ops = [o for o in pair(h.sorted()) if o.status != "fail"
           and not (o.f == "read" and o.status != "ok")]
    sure = [o for o in ops if o.status == "ok"]
    maybe = [o for o in ops if o.status != "ok"]
    for r in range(len(maybe) + 1):
        for extra in itertools.combinations(maybe, r):
            chosen = sure + list(extra)
            for perm in itertools.permutations(chosen):
                if _respects_time(perm) and _legal(perm):
                    return True
    return False


def _respects_time(perm) -> bool:
    return all(not (b.end < a.start) for i, a in enumerate(perm) for b in perm[i + 1:])


def _legal(perm) -> bool:
    state = None
    for o in perm:
        v = o.invoke["value"]
        if o.f == "read":
            if o.completion["value"] != state:
                return False
        elif o.f == "write":
            state = v
        else:
            if state != v[0]:
                return False
            state = v[1]
    return True


def _random_oplog(rng: random.Random) -> H:
    h = H()
    t = 0
    for p in range(rng.randint(1, 3)):
        t = rng.randint(0, 4)
        for _ in range(rng.randint(1, 3)):
            f = rng.choice(["read", "write", "cas"])
            start, t = t, t + rng.randint(1, 6)
            end = t
            t += rng.randint(0, 2)
            status = rng.choice(["ok", "ok", "ok", "info", "fail"])
            value = rng.choice([None, 1, 2]) if f == "read" else (
                rng.randint(1, 2) if f == "write" else [rng.choice([None, 1, 2]),
                                                         rng.randint(1, 2)])
            if f == "read":
                h.op(p, f, start, end, None, status=status, out=value)
            else:
                h.op(p, f, start, None if status == "info" and rng.random() < 0.5 else end,
                     value, status=status)
            if status == "info":
                break
    return h


def test_the_search_agrees_with_a_brute_force_on_random_oplogs():
    rng = random.Random(16)
    verdicts = {True: 0, False: 0}
    for n in range(3000):
        h = _random_oplog(rng)
        expected = _brute(h)
        got = check_key(h.sorted())
        assert got.verdict != "unknown"
        assert got.ok == expected, (n, h.sorted(), got)
        verdicts[expected] += 1
    assert min(verdicts.values()) > 300, verdicts  # both outcomes well exercised
