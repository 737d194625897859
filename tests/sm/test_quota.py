"""The NOSPACE alarm and the count limits in the state machine: what is refused, what
still works, that a refusal changes nothing (snapshot bytes identical), and that the
alarm survives a snapshot."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm import limits
from coord.sm.alarms import adds_state
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim


def _loaded() -> tuple[CoordMachine, int]:
    m = CoordMachine()
    sid = m.execute(c.OpenSession("s", 10_000), 1).session_id
    for i in range(5):
        m.execute(c.Put(b"k%d" % i, b"v" * 100))
    m.execute(c.Own(sid, "g", (Claim("r1", 1),)))
    return m, sid


def test_nospace_refuses_whole_writes_that_add_state_and_changes_nothing():
    m, sid = _loaded()
    assert m.execute(c.Alarm("activate", 7)).alarms == ("7:NOSPACE",)
    before = m.snapshot()
    refused = [
        c.Put(b"new", b"x"),
        c.Put(b"k1", b"overwrite"),
        c.Txn((), (c.DeleteRange(b"k0"), c.Put(b"k9", b"x"))),  # a put anywhere: all refused
        c.Txn((), (), (c.Txn((), (c.Put(b"deep", b"x"),)),)),
        c.OpenSession("t", 10_000),
        c.Own(sid, "g", (Claim("r2", 1),)),
        c.AllocatePidBlock("p", 10),
        c.LeasePid("t", 0),
        c.InitProducer("prod"),
    ]
    for cmd in refused:
        r = m.execute(cmd)
        assert r.error == "NO_SPACE", cmd
        assert "NOSPACE alarm is active" in r.message and "deletes" in r.message
    assert m.snapshot() == before, "a refused command changed the state"
    # what frees space, and reads, keep working
    assert m.execute(c.Range(b"k0")).kvs[0].value == b"v" * 100
    assert m.execute(c.DeleteRange(b"k0")).deleted == 1
    assert m.execute(c.Txn((), (c.DeleteRange(b"k1"),))).ok
    assert m.execute(c.Release(sid, "g", ("r1",))).ok
    assert m.execute(c.Compact(m.revision)).ok
    assert m.execute(c.CloseSession(sid)).ok
    assert m.execute(c.Alarm("deactivate", 7)).alarms == ("7:NOSPACE",)  # the one lowered
    assert m.execute(c.Put(b"new", b"x")).ok


def test_the_alarms_are_in_the_snapshot_and_each_member_s_is_its_own_member_0_too():
    """etcd 3.4's alarm store: member 0 is an id like any other (etcd's clients raise
    and lower alarms of member 0), and lowering one member's alarm leaves the others."""
    m, _ = _loaded()
    for member in (7, 9, 0):
        assert m.execute(c.Alarm("activate", member)).alarms == (f"{member}:NOSPACE",)
    restored = CoordMachine()
    restored.restore(m.snapshot())
    assert restored.alarms.active() == [(0, "NOSPACE"), (7, "NOSPACE"), (9, "NOSPACE")]
    assert restored.execute(c.Put(b"x", b"y")).error == "NO_SPACE"
    before = restored.revision
    assert restored.execute(c.Alarm("deactivate", 0)).alarms == ("0:NOSPACE",)
    assert restored.alarms.active() == [(7, "NOSPACE"), (9, "NOSPACE")]
    assert restored.execute(c.Put(b"x", b"y")).error == "NO_SPACE"
    assert restored.execute(c.Alarm("deactivate", 0)).alarms == ()  # it was not up
    for member in (7, 9):
        restored.execute(c.Alarm("deactivate", member))
    assert restored.revision == before, "an alarm does not move the revision (etcd's)"
    assert restored.execute(c.Put(b"x", b"y")).ok
    assert m.execute(c.Alarm("activate", -1)).error == "INVALID_ARGUMENT"
    assert m.execute(c.Alarm("activate", 7, "DISK_ON_FIRE")).error == "INVALID_ARGUMENT"


def test_adds_state_is_exactly_the_growing_commands():
    assert adds_state(c.LeasePid("t", 0))  # a new pid
    assert not adds_state(c.LeasePid("t", 0, pid=5))  # a lookup
    assert not adds_state(c.Txn((), (c.Range(b"a"), c.DeleteRange(b"b"))))
    assert not adds_state(c.DeleteRange(b"a")) and not adds_state(c.Compact(3))


def test_state_bytes_follow_the_kv_space_and_fall_with_deletes_and_compaction():
    m = CoordMachine()
    empty = m.state_bytes()
    for i in range(100):
        m.execute(c.Put(b"key%03d" % i, b"v" * 1000))
    full = m.state_bytes()
    assert full - empty >= 2 * 100 * 1000  # values, current and in history
    m.execute(c.DeleteRange(b"key", b"kez"))
    assert m.state_bytes() < full - 100 * 1000
    m.execute(c.Compact(m.revision))
    assert m.state_bytes() - empty < 100 * 1000 // 10
    restored = CoordMachine()
    restored.restore(m.snapshot())
    assert restored.kv.bytes == m.kv.bytes, "the estimate is rebuilt from a snapshot"


def test_session_and_ownership_limits_refuse_with_a_clear_error(monkeypatch):
    monkeypatch.setattr(limits, "MAX_SESSIONS", 2)
    monkeypatch.setattr(limits, "MAX_OWNED_PER_SESSION", 3)
    m = CoordMachine()
    a = m.execute(c.OpenSession("a", 10_000)).session_id
    m.execute(c.OpenSession("b", 10_000))
    r = m.execute(c.OpenSession("c", 10_000))
    assert r.error == "LIMIT_EXCEEDED" and "limit is 2" in r.message
    assert m.execute(c.Own(a, "g", (Claim("r1", 1), Claim("r2", 1)))).ok
    before = m.snapshot()
    r = m.execute(c.Own(a, "h", (Claim("r3", 1), Claim("r4", 1))))
    assert r.error == "LIMIT_EXCEEDED" and "at most 3" in r.message
    assert m.snapshot() == before
    assert m.execute(c.Own(a, "g", (Claim("r1", 1), Claim("r3", 1)))).ok  # r1 is kept
    m.execute(c.CloseSession(a))
    assert m.execute(c.OpenSession("c", 10_000)).ok
