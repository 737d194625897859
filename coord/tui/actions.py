"""Every change the console can make to the cluster, and the one place that allows it.

Views never hold a client: they describe an `Action` (what will happen, in words, and a
function of a `Writer`) and hand it to the `ActionGate`. The gate owns the only
`Writer` — none at all under `--read-only`, so no view, side screen or future key
binding can write — and refuses while no reachable member has quorum. The confirmation
dialog shows `Action.describe`, and the gate checks again after it, since the cluster
may have changed while the operator read it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from coord.client import AsyncClient
from coord.client.admin_aio import AsyncAdmin


class ActionRefused(Exception):
    """The gate will not run an action (read-only console, or no quorum)."""


class Writer:
    """The cluster's write operations the console offers. Made only by the gate."""

    def __init__(self, client: AsyncClient, leader_endpoint: Callable[[], str | None]) -> None:
        self.client = client
        self.admin = AsyncAdmin(client)
        self._leader_endpoint = leader_endpoint
        self._session: Any = None

    def _leader(self) -> str:
        endpoint = self._leader_endpoint()
        if not endpoint:
            raise ActionRefused("no leader is known")
        return endpoint

    async def console_session(self) -> int:
        """The console's own session, opened on first use and kept alive while the console
        runs (force-claims are held by it); closed when the console's client closes."""
        if self._session is None:
            self._session = await self.client.session("coord-tui", ttl=30.0)
        return self._session.id

    async def transfer_leader(self, to_name: str) -> str:
        leader_id = await self.admin.transfer_leader(self._leader(), to_name)
        return f"leadership transferred to {to_name} (id {leader_id})"

    async def close_session(self, session_id: int) -> str:
        header = await self.client.close_session(session_id)
        return f"session {session_id} closed at revision {header.revision}"

    async def release(self, session_id: int, group: str, resource: str) -> str:
        res = await self.client.release(session_id, group, [resource])
        return f"released {group}/{resource} ({len(res.released)} freed)"

    async def force_claim(self, group: str, resource: str) -> str:
        sid = await self.console_session()
        res = await self.client.own(sid, group, {resource: 0})
        gens = ", ".join(f"generation {g.generation}" for g in res.grants)
        return f"claimed {group}/{resource} for session {sid} ({gens})"

    async def put(self, key: bytes, value: bytes) -> str:
        res = await self.client.put(key, value)
        return f"put {key!r} at revision {res.header.revision}"

    async def delete(self, key: bytes) -> str:
        res = await self.client.delete(key)
        return f"deleted {res.deleted} key(s) at revision {res.header.revision}"

    async def compact(self, revision: int) -> str:
        await self.client.compact(revision)
        return f"compacted history before revision {revision}"

    async def add_learner(self, name: str, peer_address: str, client_address: str) -> str:
        await self.admin.add_member(self._leader(), name, peer_address, client_address,
                                    learner=True)
        return f"learner {name} added"

    async def promote(self, name: str, peer_address: str, client_address: str) -> str:
        await self.admin.add_member(self._leader(), name, peer_address, client_address,
                                    learner=False)
        return f"{name} promoted to voter"

    async def remove_member(self, name: str) -> str:
        await self.admin.remove_member(self._leader(), name)
        return f"member {name} removed"


@dataclass(frozen=True)
class Action:
    """One change: `describe` is what the confirmation dialog says will happen."""

    describe: str
    run: Callable[[Writer], Awaitable[str]]


def batch(describe: str, actions: Sequence[Action]) -> Action:
    """Several actions (marked rows) confirmed once and run in order."""

    async def run(writer: Writer) -> str:
        results = [await a.run(writer) for a in actions]
        return results[0] if len(results) == 1 else f"{len(results)} done; last: {results[-1]}"

    return Action(describe, run)


class ActionGate:
    """Runs actions, or refuses them: `writer` is None on a read-only console."""

    def __init__(self, writer: Writer | None, has_quorum: Callable[[], bool]) -> None:
        self._writer = writer
        self._has_quorum = has_quorum

    @property
    def read_only(self) -> bool:
        return self._writer is None

    def refusal(self) -> str | None:
        """Why no action may run now, or None."""
        if self._writer is None:
            return "read-only console (--read-only): actions are disabled"
        if not self._has_quorum():
            return "the cluster has no quorum: the console is read-only until it returns"
        return None

    async def run(self, action: Action) -> str:
        reason = self.refusal()
        if reason is not None or self._writer is None:
            raise ActionRefused(reason or "read-only")
        return await action.run(self._writer)
