"""Read-only degradation (ZooKeeper's read-only mode, ZOOKEEPER-704): which request
processor a member runs.

A member that has not seen a working quorum for `grace` seconds (on top of the Raft
signal itself: CheckQuorum on a leader, an election timeout without a leader on a
follower) switches to read-only: it keeps answering reads from its own applied state,
flagged stale, to clients that said they accept that, refuses every write, and tells
connected read-only sessions and watches. It switches back only once a ReadIndex
succeeds — a quorum answered and this member applied everything committed before —
so a client never sees a read-write member that is still behind."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coord.server import log_lines
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError, Timeout
from coord.server.upkeep.periodic import Periodic
from coord.sm.machine import CoordMachine

log = logging.getLogger(__name__)

READ_WRITE = "read-write"
READ_ONLY = "read-only"
NO_QUORUM = "no-quorum"  # quorum lost with read-only mode disabled: nothing is served
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ModeChange:
    """Member-local: offered to every stream on the member when its mode changes."""

    mode: str
    member: str
    term: int
    revision: int


class Refused(NodeError):
    """A request this member's mode does not let it serve (the caller chooses the
    reason: READ_ONLY for read-only-capable clients, NO_QUORUM for the others)."""

    reason = "NO_QUORUM"


class ModeMonitor:
    def __init__(
        self,
        node: Node,
        machine: CoordMachine,
        barrier: Callable[[float, bool], Awaitable[None]],
        enabled: bool = True,
        grace_s: float = 0.3,
    ) -> None:
        self.node = node
        self.machine = machine
        self.barrier = barrier
        self.enabled = enabled
        self.grace_s = grace_s
        self.mode = READ_WRITE
        self.started_at = time.monotonic()
        # A member just started has not had the chance to find its peers: wait out the
        # longest first election (2 election timeouts) before calling itself cut off.
        self.startup_s = 2 * node.options.election_ticks * node.options.tick_ms / 1000
        self.listeners: list[Callable[[ModeChange], None]] = []
        self.cut_off = asyncio.Event()  # set while not read-write: waiting reads give up
        self._loop = Periodic("mode-monitor", POLL_S, self.step)

    @property
    def serving_writes(self) -> bool:
        return self.mode == READ_WRITE

    @property
    def read_only(self) -> bool:
        return self.mode == READ_ONLY

    def cut_off_for(self) -> float:
        """Seconds since this member last heard from a quorum."""
        return self.node.quorum_lost_for()

    def refusal(self, read_only_ok: bool) -> tuple[str, str]:
        """(reason, message) for a request this mode does not serve."""
        name, lost = self.node.me.name, self.cut_off_for()
        if read_only_ok and self.read_only:
            return "READ_ONLY", (
                f"member {name} is read-only: cut off from a quorum for {lost:.1f}s; "
                "writes are refused until it rejoins a majority"
            )
        return "NO_QUORUM", (
            f"member {name} has no quorum (cut off for {lost:.1f}s); "
            "try another member"
        )

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def step(self) -> None:
        """One look at the quorum signal; switch modes when it says so."""
        lost = self.node.quorum_lost_for()
        if self.mode == READ_WRITE:
            starting = time.monotonic() - self.started_at < self.startup_s
            if lost >= self.grace_s and not starting:
                self._switch(READ_ONLY if self.enabled else NO_QUORUM)
            return
        if lost > 0:
            return
        try:
            await self._barrier_while_led()
        except NodeError:
            return  # not caught up (or the quorum went again): stay where we are
        if self.node.quorum_lost_for() == 0:
            self._switch(READ_WRITE)

    async def _barrier_while_led(self) -> None:
        """The ReadIndex barrier, given up the moment the leader or term changes: one
        sent to a leader that was just SIGCONTed and is about to learn it was deposed is
        never answered, and waiting out its timeout kept a healed member read-only (and
        its local sessions unregistered) ~0.3 s after a new leader could answer."""
        leader, term = self.node.leader, self.node.term
        barrier = asyncio.ensure_future(self.barrier(max(0.1, self.grace_s), False))
        try:
            while not barrier.done():
                await asyncio.wait([barrier], timeout=POLL_S)
                if not barrier.done() and (self.node.leader, self.node.term) != (leader, term):
                    raise Timeout("the leader changed while the barrier waited")
            barrier.result()
        finally:
            barrier.cancel()

    def _switch(self, mode: str) -> None:
        old, self.mode = self.mode, mode
        if mode == READ_WRITE:
            self.cut_off.clear()
        else:
            self.cut_off.set()
        change = ModeChange(mode, self.node.me.name, self.node.term, self.machine.revision)
        log.warning(
            "%s: %s -> %s (term %d, revision %d, quorum lost for %.1fs)",
            change.member, old, mode, change.term, change.revision, self.cut_off_for(),
            extra=log_lines.event(log_lines.MODE, term=change.term),
        )
        for listener in self.listeners:
            listener(change)
