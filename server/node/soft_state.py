"""The node's soft state as others watch it: who leads, in which role this member is,
whether it sees a quorum, and since when it has not.

Its own module because what changes it is one call per Ready (`note`) and everything
else only reads it: the log lines of leader and quorum changes, the subscribers of
`Node.events` (the admin API's status stream), and the quorum's loss counted for the
session tracker and the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from coord.raft import RawNode, Role, SoftState
from coord.server import log_lines

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StatusEvent:
    term: int
    leader: int
    role: Role
    has_quorum: bool
    unix_ms: int


class SoftStateWatch:
    """The soft state last seen, told to the log and the subscribers as it changes."""

    def __init__(self, name: str, raw: RawNode, name_of: Callable[[int], str]) -> None:
        """`name`: this member's, for the log; `name_of(id)`: a member's, for the log."""
        self._name = name
        self._raw = raw
        self._name_of = name_of
        self._soft = raw.soft_state()
        self._quorum_lost_at: float | None = time.monotonic()
        self.quorum_losses = 0  # times the quorum went away (a leader that had none may
        # have missed keepalives: see SessionTracker)
        self._subscribers: list[asyncio.Queue[StatusEvent]] = []

    def note(self, soft: SoftState | None) -> None:
        """A Ready's soft state (None: the core's has not changed since the last Ready's),
        once the Ready is carried out: every change comes in a Ready, so the core's is
        not built and compared again after each one."""
        before = self._soft
        if soft is None or soft == before:
            return
        self._soft = soft
        if soft.has_quorum:
            self._quorum_lost_at = None
        elif self._quorum_lost_at is None:
            self._quorum_lost_at = time.monotonic()
            self.quorum_losses += 1
        event = self._event(soft)
        same_leader = (before.role, before.leader) == (soft.role, soft.leader)
        leader = self._name_of(soft.leader)
        log.info(
            "%s: %s term=%d leader=%s quorum=%s",
            self._name,
            soft.role.label,
            event.term,
            leader or "-",
            "yes" if soft.has_quorum else "NO",
            extra=log_lines.event(
                log_lines.QUORUM if same_leader else log_lines.LEADER,
                term=event.term,
                leader=leader or None,
            ),
        )
        for q in self._subscribers:
            q.put_nowait(event)

    def _event(self, soft: SoftState) -> StatusEvent:
        now_ms = time.time_ns() // 1_000_000
        return StatusEvent(self._raw.term, soft.leader, soft.role, soft.has_quorum, now_ms)

    def quorum_lost_for(self) -> float:
        """Seconds since this member last saw a working quorum (0 while it sees one)."""
        if self._quorum_lost_at is None:
            return 0.0
        return time.monotonic() - self._quorum_lost_at

    async def events(self) -> AsyncIterator[StatusEvent]:
        """Leader and quorum changes, starting with the current state."""
        q: asyncio.Queue[StatusEvent] = asyncio.Queue()
        q.put_nowait(self._event(self._soft))
        self._subscribers.append(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subscribers.remove(q)
