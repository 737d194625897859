"""Asking the leader about a session's liveness from any member: renew it (a keepalive)
or read how long it has left. Only the leader's session tracker knows deadlines, so a
follower forwards over the peer port, batched (server/core/session_asks.py). Native
session keepalives and etcd lease keepalives/TTL queries both come here: a lease is a
session."""

from __future__ import annotations

from coord.server.core.coordinator import Coordinator
from coord.server.core.session_tracker import GONE, SessionTracker

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
    if coord.node.is_leader:
        return tracker.keepalive(session_id)
    return await _ask_leader(coord, "KeepAlive", session_id, timeout)


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
