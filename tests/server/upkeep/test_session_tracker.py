"""The leader's session deadlines (server/upkeep/session_tracker.py), on a real state machine
and a stand-in node that is a caught-up leader."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from tests.clocks import FakeClock


def _leader() -> SimpleNamespace:
    return SimpleNamespace(caught_up_leader=True, is_leader=True, term=1, quorum_losses=0,
                           me=SimpleNamespace(name="m1"))


def _tracked(monkeypatch, fail_first: int = 0):
    """A tracker on a real machine whose proposals apply at once; `fail_first` proposals
    fail as a lost leader's would."""
    from coord.server.node.errors import NotLeader
    from coord.server.upkeep import session_tracker

    clock = FakeClock(1000.0)
    monkeypatch.setattr(session_tracker, "time", clock)
    m = CoordMachine()
    proposed: list[tuple[int, ...]] = []

    async def propose(cmd: c.ExpireSessions):
        if len(proposed) < fail_first:
            proposed.append(())
            raise NotLeader(None)
        proposed.append(cmd.session_ids)
        return m.execute(cmd)

    return clock, m, SessionTracker(_leader(), m, propose), proposed


def test_a_reused_session_id_does_not_inherit_the_ended_sessions_deadline(monkeypatch):
    """Found by the differential test: an etcd lease revoked and granted again under the
    same id reported the old lease's remaining TTL (and would have expired on its clock)."""
    clock, m, tracker, _ = _tracked(monkeypatch)
    m.execute(c.OpenSession("etcd-lease", 60_000, session_id=7), 1)
    assert tracker.keepalive(7) == 60_000
    clock.now += 1.0
    m.execute(c.CloseSession(7))
    m.execute(c.OpenSession("etcd-lease", 5_000, session_id=7), 2)
    assert tracker.remaining(7) == 5_000  # its own full TTL, not the old lease's 59 s
    clock.now += 1.0
    assert tracker.keepalive(7) == 5_000 and tracker.remaining(7) == 5_000
    clock.now += 1.0
    assert tracker.remaining(7) == 4_000  # counted down from its own keepalive


def test_sessions_expire_by_deadline_and_keepalives_move_them(monkeypatch):

    clock, m, tracker, proposed = _tracked(monkeypatch)
    kept = m.execute(c.OpenSession("kept", 2_000), 1).session_id
    idle = m.execute(c.OpenSession("idle", 2_000), 1).session_id
    asyncio.run(tracker.sweep())  # both tracked from now
    for _ in range(3):  # 0.9 s steps, no stall
        clock.now += 0.9
        assert tracker.keepalive(kept) == 2_000
        asyncio.run(tracker.sweep())
    assert proposed == [(idle,)]
    assert kept in m.sessions and idle not in m.sessions


def test_a_failed_expiry_is_proposed_again(monkeypatch):

    from coord.server.node.errors import NodeError

    clock, m, tracker, proposed = _tracked(monkeypatch, fail_first=1)
    sid = m.execute(c.OpenSession("s", 1_000), 1).session_id
    asyncio.run(tracker.sweep())
    clock.now += 0.6
    asyncio.run(tracker.sweep())
    clock.now += 0.6
    try:
        asyncio.run(tracker.sweep())
        raise AssertionError("the first proposal was to fail")
    except NodeError:
        pass
    clock.now += 0.1
    asyncio.run(tracker.sweep())
    assert proposed == [(), (sid,)] and sid not in m.sessions


def test_idle_sweeps_touch_no_session_and_keepalives_do_not_grow_the_heap(monkeypatch):
    """What makes 100k sessions cheap: a sweep with nothing due looks at none of them,
    and renewals leave at most ~2 heap entries per session (the old sweep walked and
    sorted every session every 100 ms: planted below, the count catches it)."""

    from coord.sm.sessions import SessionTable

    clock, m, tracker, proposed = _tracked(monkeypatch)
    ids = [m.execute(c.OpenSession("s", 60_000), 1).session_id for _ in range(3_000)]
    asyncio.run(tracker.sweep())
    walks = []
    for name in ("all", "ids"):
        original = getattr(SessionTable, name)
        monkeypatch.setattr(SessionTable, name,
                            lambda self, _o=original, _n=name: walks.append(_n) or _o(self))
    for _ in range(20):
        clock.now += 0.1
        for sid in ids:
            tracker.keepalive(sid)
        asyncio.run(tracker.sweep())
    assert walks == [] and proposed == []
    assert len(tracker._heap) <= 2 * len(ids) + 1024
    # the planted violation: a sweep that walks every session is seen by the same count
    tracker.machine.sessions.ids()
    assert walks == ["ids"]
