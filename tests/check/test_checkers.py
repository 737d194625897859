"""The ownership, producer-id, lost-write and register-set checkers: each passes a clean
oplog and catches a planted violation, naming the rows that show it."""

from __future__ import annotations

from coord.check import check_all
from coord.check.lost_writes import check_lost_writes
from coord.check.ownership import check_ownership
from coord.check.producers import check_producers
from coord.check.registers import check_registers
from tests.check.oplogs import H

G = {"group": "g", "resource": "r0"}


def _own(h: H, p: int, t: int, session: str, gen: int, rev: int) -> None:
    h.op(p, "own", t, t + 1, None, session=session, generation=gen, revision=rev, **G)


def _write(h: H, p: int, t: int, session: str, gen: int, rev: int, seq: int | None) -> None:
    h.op(p, "write_fenced", t, t + 1, f"{session}@{gen}", status="ok" if seq else "fail",
         session=session, generation=gen, revision=rev, sequence=seq, **G)


def _clean_ownership() -> H:
    h = H(key=None)
    _own(h, 0, 1, "s1", 1, 10)
    _write(h, 0, 3, "s1", 1, 10, 1)
    _own(h, 1, 5, "s2", 2, 14)  # s1 expired; s2 takes over
    _write(h, 1, 7, "s2", 2, 14, 2)
    _write(h, 0, 9, "s1", 1, 10, None)  # the zombie is refused
    return h


def test_ownership_clean_oplog_passes():
    r = check_ownership(_clean_ownership().sorted())
    assert r.ok and r.stats == {"grants": 2, "accepted_writes": 2, "resources": 1,
                                "refused_writes": 1}


def test_ownership_catches_two_owners_at_one_generation():
    h = _clean_ownership()
    _own(h, 2, 11, "s3", 2, 20)
    r = check_ownership(h.sorted())
    assert not r.ok and r.count == 1
    assert "generation 2 granted to 2 sessions" in r.violations[0]["message"]


def test_ownership_catches_two_sessions_granted_one_generation_at_one_revision():
    """The same token handed to two sessions: the grants tie on (revision, generation),
    and the checker must still name them (not compare the ops themselves)."""
    h = _clean_ownership()
    _own(h, 2, 11, "s3", 2, 14)
    r = check_ownership(h.sorted())
    assert r.count == 1 and "generation 2 granted to 2 sessions (s2, s3)" in \
        r.violations[0]["message"]


def test_ownership_catches_a_generation_going_back():
    h = _clean_ownership()
    _own(h, 2, 11, "s3", 1, 20)
    r = check_ownership(h.sorted())
    assert any("went back from 2 (revision 14) to 1 (revision 20)" in v["message"]
               for v in r.violations)


def test_ownership_catches_the_sink_accepting_a_zombie():
    h = _clean_ownership()
    _write(h, 0, 11, "s1", 1, 10, 3)
    r = check_ownership(h.sorted())
    assert r.count == 1 and "accepted older token (1, 10) after (2, 14)" in \
        r.violations[0]["message"]
    assert [row["type"] for rows in r.violations[0]["ops"] for row in rows] == \
        ["invoke", "ok", "invoke", "ok"]


def test_ownership_catches_a_token_never_granted():
    h = _clean_ownership()
    _write(h, 2, 11, "s9", 3, 30, 3)
    r = check_ownership(h.sorted())
    assert r.count == 1 and "never granted" in r.violations[0]["message"]


def _clean_producers() -> H:
    h = H(key=None)
    h.op(0, "allocate_pid_block", 1, 2, [1, 11])
    h.op(1, "lease_pid", 1, 3, None, pid=11, epoch=7)
    h.op(0, "init_producer", 4, 5, None, key="tx", pid=12, epoch=0)
    h.op(1, "check_producer", 6, 7, None, key="tx", pid=12, epoch=0)
    h.op(0, "init_producer", 8, 9, None, key="tx", pid=12, epoch=1)
    h.op(1, "check_producer", 10, 11, None, status="fail", key="tx", pid=12, epoch=0)
    h.op(1, "allocate_pid_block", 12, 13, [13, 23])
    return h


def test_producers_clean_oplog_passes():
    r = check_producers(_clean_producers().sorted())
    assert r.ok and r.stats == {"pids_handed_out": 22, "producers": 1, "checks_refused": 1}


def test_producers_catch_a_pid_handed_out_twice():
    h = _clean_producers()
    h.op(2, "allocate_pid_block", 14, 15, [20, 30])
    r = check_producers(h.sorted())
    assert r.count == 1 and "[13, 23) and block [20, 30) overlap" in r.violations[0]["message"]
    h = _clean_producers()
    h.op(2, "init_producer", 14, 15, None, key="other", pid=12, epoch=0)
    assert "pid 12 given to producers 'tx' and 'other'" in \
        check_producers(h.sorted()).violations[0]["message"]


def test_producers_catch_an_epoch_going_back():
    h = _clean_producers()
    h.op(2, "init_producer", 14, 15, None, key="tx", pid=12, epoch=0)
    msgs = [v["message"] for v in check_producers(h.sorted()).violations]
    assert any("identity (12, 0) handed out twice" in m for m in msgs)
    assert any("epoch went back from 1 to 0" in m for m in msgs)


def test_producers_catch_a_fenced_zombie_accepted():
    h = _clean_producers()
    h.op(2, "check_producer", 14, 15, None, key="tx", pid=12, epoch=0)
    r = check_producers(h.sorted())
    assert r.count == 1 and "fenced identity (12, 0) accepted after (12, 1)" in \
        r.violations[0]["message"]
    # a check sent before the bump completed may still be accepted: no violation
    h = _clean_producers()
    h.op(2, "check_producer", 8, 9, None, key="tx", pid=12, epoch=0)
    assert check_producers(h.sorted()).ok


def _clean_adds() -> H:
    h = H(key=None)
    h.op(0, "add", 1, 2, "v0", key="set/0")
    h.op(1, "add", 1, None, "v1", key="set/1")  # unknown outcome: may be there
    h.op(2, "add", 3, 4, "v2", status="fail", key="set/2")
    h.op(0, "add", 5, 6, "v3", key="set/3")
    return h


def test_lost_writes_clean_oplog_passes():
    h = _clean_adds()
    h.op(9, "read_all", 10, 11, [["set/0", "v0"], ["set/1", "v1"], ["set/3", "v3"]],
         key="set/")
    r = check_lost_writes(h.sorted())
    assert r.ok and r.stats == {"acknowledged": 2, "lost": 0, "unknown_present": 1,
                                "final_keys": 3}


def test_lost_writes_catches_a_missing_and_an_invented_write():
    h = _clean_adds()
    h.op(9, "read_all", 10, 11, [["set/0", "v0"], ["set/9", "x"]], key="set/")
    msgs = [v["message"] for v in check_lost_writes(h.sorted()).violations]
    assert msgs == ["acknowledged write of 'set/3' is missing from the final state",
                    "'set/9' is in the final state but nobody wrote it"]


def test_lost_writes_without_a_final_read_is_unknown_not_ok():
    r = check_lost_writes(_clean_adds().sorted())
    assert (r.verdict, r.ok) == ("unknown", False)


def test_registers_check_every_key_and_name_the_bad_one():
    h = H(key="a").op(0, "write", 1, 2, 1).op(1, "read", 3, 4, out=1)
    h.op(2, "write", 1, 2, 5, key="b").op(3, "read", 3, 4, out=6, key="b")
    r = check_registers(h.sorted())
    assert r.count == 1 and r.violations[0]["key"] == "b"
    assert r.stats == {"keys": 2, "ops": 4, "undecided_keys": 0}


def test_check_all_runs_the_checkers_an_oplog_needs():
    rows = _clean_ownership().sorted()
    assert [r.checker for r in check_all(rows)] == ["ownership"]
    assert all(r.ok for r in check_all(rows))


S = 1_000_000_000  # the oplog's clock is in ns


def _session_oplog() -> H:
    h = H(key=None)
    h.op(0, "open_session", 0, 1 * S // 10, 1.0, session=7)
    h.op(0, "own", 2 * S // 10, 3 * S // 10, None, session=7, generation=1, revision=3, **G)
    # stalled 2 s: gone, as it should be
    h.op(0, "own", 23 * S // 10, 24 * S // 10, None, status="fail", session=7, **G)
    return h


def _gone(h: H) -> list[dict]:
    rows = h.sorted()
    for r in rows:
        if r["type"] == "fail":
            r["error"] = "UNKNOWN_SESSION"
    return rows


def test_sessions_clean_oplog_passes():
    from coord.check.sessions import check_sessions

    r = check_sessions(_gone(_session_oplog()))
    assert r.ok and r.stats == {"sessions": 1, "session_ops": 2, "gone": 1}


def test_sessions_catch_an_early_expiry():
    from coord.check.sessions import check_sessions

    h = _session_oplog()
    h.op(1, "open_session", 0, S // 10, 5.0, session=8)
    h.op(1, "own", 2 * S, 3 * S, None, status="fail", session=8, **G)  # 3 s into a 5 s TTL
    r = check_sessions(_gone(h))
    assert r.count == 1 and "session 8 gone 3.00 s after its open was sent (TTL 5 s)" in \
        r.violations[0]["message"]


def test_sessions_catch_a_session_alive_long_after_its_ttl_unless_a_fault_explains_it():
    from coord.check.sessions import check_sessions

    h = _session_oplog()
    h.op(1, "open_session", 0, S // 10, 1.0, session=8)
    h.op(1, "own", 9 * S, 9 * S + 1, None, session=8, generation=2, revision=9, **G)
    r = check_sessions(_gone(h))
    assert r.count == 1 and "session 8 still alive 8.90 s after its open completed" in \
        r.violations[0]["message"]
    assert check_sessions(_gone(h), faults=[(1 * S, 5 * S)]).ok  # 4 s after the fault: ok
    r = check_sessions(_gone(h), faults=[(1 * S, 2 * S)])  # 7 s after it ended: too late
    assert r.count == 1 and "still alive 7.00 s after the last fault ended" in \
        r.violations[0]["message"]
    assert check_sessions(_gone(h), late_slack_s=10).ok


def test_check_all_gives_every_checker_the_runs_options():
    """The run's faults reach the sessions checker and its time limit the linearizable
    one: the same oplogs' verdicts move with the options."""
    from coord.check import CheckOptions

    h = _session_oplog()
    h.op(1, "open_session", 0, S // 10, 1.0, session=8)
    h.op(1, "own", 9 * S, 9 * S + 1, None, session=8, generation=2, revision=9, **G)

    def sessions(options: CheckOptions) -> str:
        (r,) = [r for r in check_all(_gone(h), options) if r.checker == "sessions"]
        return r.verdict

    assert sessions(CheckOptions()) == "illegal"
    assert sessions(CheckOptions(faults=((1 * S, 5 * S),))) == "ok"
    hard = H()  # many concurrent writes and a read none explains: a long search
    for p in range(14):
        hard.op(p, "write", 1 + p, 100, p)
    hard.op(99, "read", 200, 201, out=-1)
    (lin,) = [r for r in check_all(hard.sorted(), CheckOptions(lin_time_limit_s=0.0))
              if r.checker == "linearizable"]
    assert lin.verdict == "unknown" and "time limit" in lin.reason

