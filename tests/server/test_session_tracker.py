"""The leader's session deadlines (server/session_tracker.py), on a real state machine
and a stand-in node that is a caught-up leader."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from coord.server.core.session_tracker import SessionTracker
from coord.sm import commands as c
from coord.sm.machine import CoordMachine


async def never(cmd: object) -> object:
    raise AssertionError("nothing should expire here")


def test_a_reused_session_id_does_not_inherit_the_ended_sessions_deadline():
    """Found by the differential test: an etcd lease revoked and granted again under the
    same id reported the old lease's remaining TTL (and would have expired on its clock)."""
    node = SimpleNamespace(caught_up_leader=True, is_leader=True, term=1, quorum_losses=0,
                           me=SimpleNamespace(name="m1"))
    m = CoordMachine()
    tracker = SessionTracker(node, m, never)
    m.execute(c.OpenSession("etcd-lease", 60_000, session_id=7), 1)
    assert tracker.keepalive(7) == 60_000
    m.execute(c.CloseSession(7))
    m.execute(c.OpenSession("etcd-lease", 5_000, session_id=7), 2)
    assert 4_000 < tracker.remaining(7) <= 5_000
    assert tracker.keepalive(7) == 5_000 and 4_000 < tracker.remaining(7) <= 5_000


def test_a_new_leader_names_itself_in_the_log_once_per_term():
    node = SimpleNamespace(caught_up_leader=True, is_leader=True, term=4, quorum_losses=0,
                           me=SimpleNamespace(name="m1"))
    proposed = []

    async def propose(cmd: object) -> object:
        proposed.append(cmd)
        return None

    async def sweeps() -> None:
        tracker = SessionTracker(node, CoordMachine(), propose)
        await tracker.sweep()
        await tracker.sweep()
        node.term = 5
        await tracker.sweep()

    asyncio.run(sweeps())
    assert proposed == [c.NoteLeader("m1", 4), c.NoteLeader("m1", 5)]
