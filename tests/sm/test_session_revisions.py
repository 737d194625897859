"""When sessions (etcd leases) move the revision: as etcd's leases. Opening one never
does; ending one (close = LeaseRevoke, expire, sever) does, once for the whole command,
only if it released something (session-bound keys deleted, owned resources freed). A
session that ended holding nothing still emits its end event, at the current revision."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.commands import Claim
from coord.sm.machine import CoordMachine
from coord.sm.records import EXPIRED, RELEASED, SEVERED, OwnershipEvent, SessionEvent, WatchEvent


def opened(m: CoordMachine, session_id: int = 0, request_id: str = "") -> int:
    return m.execute(c.OpenSession("s", 10_000, session_id=session_id,
                                   request_id=request_id), 1).session_id


def machine_at_revision_3() -> CoordMachine:
    """Some history first, so "did not move" is not "stayed where an empty machine is"
    (revision 1, as etcd's empty store: two puts land at 2 and 3)."""
    m = CoordMachine()
    assert m.revision == 1
    for i in range(2):
        m.execute(c.Put(b"other/%d" % i, b"x"))
    m.drain_events()
    assert m.revision == 3
    return m


def test_a_grant_does_not_move_the_revision():
    m = machine_at_revision_3()
    before = m.snapshot()
    r = m.execute(c.OpenSession("s", 10_000, request_id="open-1"), 7)
    assert r.ok and r.revision == 3 and m.revision == 3  # etcd's LeaseGrant header
    assert m.execute(c.OpenSession("s", 10_000, session_id=77), 8).revision == 3  # asked-for id
    assert m.drain_events() == []
    # Still a change of state: it is in the snapshot, the leader's clock moved, and a
    # retry with the same request id is answered from memory (no second session).
    assert m.snapshot() != before and m.clock_ms == 8
    assert m.execute(c.OpenSession("s", 10_000, request_id="open-1"), 9) == r
    assert len(m.sessions) == 2
    assert m.execute(c.Put(b"k", b"v")).revision == 4  # the next change is the next one


def test_a_revoke_of_a_lease_without_keys_does_not_move_the_revision():
    m = machine_at_revision_3()
    sid = opened(m)
    r = m.execute(c.CloseSession(sid))
    assert r.ok and r.revision == 3 and m.revision == 3
    assert m.drain_events() == [SessionEvent(RELEASED, sid, 3)]  # streams still learn it
    assert sid not in m.sessions
    # keys it had but no longer holds (rebound, deleted) are not its to release
    sid = opened(m)
    m.execute(c.Put(b"a", b"1", session_id=sid))
    m.execute(c.Put(b"a", b"2"))  # rebinds "a" to no session
    m.execute(c.Put(b"b", b"1", session_id=sid))
    m.execute(c.DeleteRange(b"b"))
    m.drain_events()
    assert m.revision == 7
    assert m.execute(c.CloseSession(sid)).revision == 7 and m.revision == 7
    assert m.drain_events() == [SessionEvent(RELEASED, sid, 7)]
    assert m.ownership.history.since(1, "g") == ()


def test_a_revoke_with_keys_moves_the_revision_once():
    m = machine_at_revision_3()
    sid = opened(m)
    m.execute(c.Put(b"a", b"1", session_id=sid))
    m.execute(c.Put(b"b", b"1", session_id=sid))
    m.drain_events()
    assert m.revision == 5
    r = m.execute(c.CloseSession(sid))
    assert r.ok and r.revision == 6 and m.revision == 6
    events = m.drain_events()
    assert [(type(e), e.revision) for e in events] == [
        (WatchEvent, 6), (WatchEvent, 6), (SessionEvent, 6)]
    assert [e.kv.key for e in events[:2]] == [b"a", b"b"] and events[-1].type == RELEASED
    assert m.kv.get(b"a") is None and m.kv.get(b"b") is None


def test_a_close_that_frees_owned_resources_moves_it_once_and_records_the_release():
    m = machine_at_revision_3()
    sid = opened(m)
    m.execute(c.Own(sid, "g", (Claim("p0", 1), Claim("p1", 1))))
    m.drain_events()
    r = m.execute(c.CloseSession(sid))
    assert r.revision == 5 == m.revision
    assert [(e.resource, e.kind, e.revision) for e in m.ownership.history.since(5, "g")] == [
        ("p0", "release", 5), ("p1", "release", 5)]
    assert {e.revision for e in m.drain_events()} == {5}


def test_an_expiry_moves_the_revision_once_if_any_session_held_something():
    m = machine_at_revision_3()
    empty, keyed, owning = opened(m), opened(m), opened(m)
    m.execute(c.Put(b"k1", b"1", session_id=keyed))
    m.execute(c.Put(b"k2", b"1", session_id=keyed))
    m.execute(c.Own(owning, "g", (Claim("p", 1),)))
    m.drain_events()
    assert m.revision == 6
    r = m.execute(c.ExpireSessions((empty, keyed, owning)))
    assert r.ok and r.expired == (empty, keyed, owning)
    assert r.revision == 7 == m.revision  # one command, one revision, however many ended
    events = m.drain_events()
    assert {e.revision for e in events} == {7}
    assert [e for e in events if isinstance(e, SessionEvent)] == [
        SessionEvent(EXPIRED, s, 7) for s in (empty, keyed, owning)]
    assert sum(isinstance(e, WatchEvent) for e in events) == 2
    assert [(e.resource, e.kind) for e in events if isinstance(e, OwnershipEvent)] == [
        ("p", "expire")]


def test_an_expiry_of_sessions_holding_nothing_does_not_move_it():
    m = machine_at_revision_3()
    a, b = opened(m), opened(m)
    r = m.execute(c.ExpireSessions((b, a)))
    assert r.ok and r.expired == (b, a) and r.revision == 3 == m.revision
    assert m.drain_events() == [SessionEvent(EXPIRED, b, 3), SessionEvent(EXPIRED, a, 3)]
    assert len(m.sessions) == 0


def test_a_sever_moves_the_revision_once_with_the_claim():
    m = machine_at_revision_3()
    a, b = opened(m), opened(m)
    m.execute(c.Own(a, "g", (Claim("p", 1),)))  # all `a` holds is what `b` takes
    m.drain_events()
    assert m.revision == 4
    r = m.execute(c.Own(b, "g", (Claim("p", 0),)))
    assert r.ok and r.severed == (a,) and r.revision == 5 == m.revision
    events = m.drain_events()
    assert {e.revision for e in events} == {5}
    assert [e.type for e in events if isinstance(e, SessionEvent)] == [SEVERED]
    # with keys and other resources too: still once
    c_ = opened(m)
    m.execute(c.Own(b, "g", (Claim("q", 1),)))
    m.execute(c.Put(b"bk", b"1", session_id=b))
    m.drain_events()
    assert m.revision == 7
    r = m.execute(c.Own(c_, "g", (Claim("p", 0),)))
    assert r.severed == (b,) and r.revision == 8 == m.revision
    assert {e.revision for e in m.drain_events()} == {8}
    assert m.kv.get(b"bk") is None and m.ownership.get_owner("g", "q").owner == 0


# -- property: the revision moves at a session's end iff it released something ----------

SIDS = st.integers(1, 4)
session_commands = st.one_of(
    st.builds(lambda: c.OpenSession("s", 5_000)),
    st.builds(c.CloseSession, SIDS),
    st.builds(lambda ids: c.ExpireSessions(tuple(ids)), st.lists(SIDS, max_size=3)),
    st.builds(lambda sid, r, g: c.Own(sid, "g", (Claim(r, g),)), SIDS,
              st.sampled_from(["p", "q"]), st.integers(0, 2)),
    st.builds(lambda k, sid: c.Put(k, b"v", session_id=sid), st.sampled_from([b"a", b"b"]),
              st.integers(0, 4)),
    st.builds(c.DeleteRange, st.sampled_from([b"a", b"b"])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(session_commands, min_size=1, max_size=30))
def test_a_session_end_moves_the_revision_iff_it_released_something(cmds):
    m = CoordMachine()
    for cmd in cmds:
        before = m.revision
        ids = (cmd.session_id,) if isinstance(cmd, c.CloseSession) else \
            cmd.session_ids if isinstance(cmd, c.ExpireSessions) else ()
        live = [i for i in dict.fromkeys(ids) if i in m.sessions]
        held = any(m.sessions.get(i).keys or m.sessions.get(i).owned for i in live)
        r = m.execute(cmd)
        events = m.drain_events()
        assert all(e.revision == r.revision == m.revision for e in events)
        if isinstance(cmd, c.OpenSession):
            assert m.revision == before == r.revision and events == []
        elif ids:
            assert m.revision == before + held == r.revision
            assert [e.session_id for e in events if isinstance(e, SessionEvent)] == live
