"""Asking the leader about a session's liveness from any member: renew it (a keepalive)
or read how long it has left. Only the leader's session tracker knows deadlines, so a
follower forwards over the peer port, batched (server/forward/session_asks.py). Native
session keepalives and etcd lease keepalives/TTL queries both come here: a lease is a
session."""

from __future__ import annotations

import asyncio

from coord.server.requests.coordinator import Coordinator
from coord.server.upkeep.session_tracker import GONE, SessionTracker

FORWARD_TIMEOUT_S = 2.0

__all__ = ["GONE", "remaining", "renew"]


async def renew(
    coord: Coordinator,
    tracker: SessionTracker,
    session_id: int,
    timeout: float = FORWARD_TIMEOUT_S,
) -> int | None:
    """The session's full TTL (ms) once the leader renewed it, GONE if it is over, None
    if no leader could say within `timeout` (the caller keeps trying)."""
    return await renew_soon(coord, tracker, session_id, timeout)


def renew_soon(coord: Coordinator, tracker: SessionTracker, session_id: int,
               timeout: float = FORWARD_TIMEOUT_S) -> asyncio.Future[int | None]:
    """`renew` as a future, done at once on the leader (a stream with many keepalives
    out needs no task for each)."""
    if coord.node.is_leader:
        return _done(tracker.keepalive(session_id))
    leader = coord.node.leader
    if leader is None:
        return _done(None)
    return coord.link.session_asks(leader, "KeepAlive").ask_soon(session_id, timeout)


def _done(value: int | None) -> asyncio.Future[int | None]:
    fut: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


async def remaining(coord: Coordinator, tracker: SessionTracker, session_id: int) -> int | None:
    """Milliseconds the session has left on the leader's clock, GONE, or None (unknown)."""
    if coord.node.is_leader:
        return tracker.remaining(session_id)
    return await _ask_leader(coord, "Remaining", session_id)


async def _ask_leader(
    coord: Coordinator, method: str, session_id: int, timeout: float = FORWARD_TIMEOUT_S
) -> int | None:
    """Batched with the other asks this member forwards meanwhile (SessionAsks)."""
    leader = coord.node.leader
    if leader is None:
        return None
    return await coord.link.session_asks(leader, method).ask(session_id, timeout)
