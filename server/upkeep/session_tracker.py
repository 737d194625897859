"""Session liveness, decided by the leader alone.

Keepalives reach the leader (followers forward them) and only move an in-memory
deadline: nothing is replicated per keepalive. When a deadline passes, the leader
proposes `ExpireSessions`, so every member expires the same sessions at the same log
position. A member that becomes leader starts every session's deadline afresh at its
full TTL, so a failover never expires a live session — it can only extend a dead one
by up to one TTL (etcd's leases behave the same way; coord says so up front).

The same holds whenever the leader may have missed keepalives through no fault of the
clients: after it lost and regained its quorum (clients may have been talking to a
read-only member meanwhile), and after its own process stalled (SIGSTOP, a long GC or
swap): a sweep that runs late restarts every clock instead of expiring on stale ones.

Costs: a sweep looks only at what is due — deadlines sit in a heap (a keepalive pushes
its new one; superseded ones are skipped when they surface, and the heap is rebuilt
when they outnumber the live ones), and new sessions arrive through the machine's
opener hook — so 100k idle sessions cost nothing per sweep. Only a restart of every
clock (new term, stall, quorum regained) walks all sessions, once."""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Awaitable, Callable

from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.upkeep.periodic import Periodic
from coord.sm.commands import ExpireSessions
from coord.sm.limits import MAX_EXPIRE_IDS
from coord.sm.machine import CoordMachine
from coord.sm.sessions import Session

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 0.1
STALL_S = 1.0  # a sweep this late means this process was not running
GONE = -1


class SessionTracker:
    def __init__(
        self,
        node: Node,
        machine: CoordMachine,
        propose: Callable[[ExpireSessions], Awaitable[object]],
    ) -> None:
        self.node = node
        self.machine = machine
        self.propose = propose
        self.deadlines: dict[int, float] = {}
        # whose deadline each is: an ended session's id may be asked for again (etcd
        # clients choose lease ids), and the new session must not inherit the deadline
        self._owners: dict[int, Session] = {}
        self._heap: list[tuple[float, int]] = []  # (deadline, id); stale entries skipped
        self._fresh: list[Session] = []  # opened since the last sweep
        machine.session_openers.append(self._fresh.append)
        self._led_term = 0
        self._quorum_losses = node.quorum_losses
        self._last_sweep = time.monotonic()
        self._loop = Periodic("session-sweep", SWEEP_INTERVAL_S, self._sweep_logged)

    def keepalive(self, session_id: int) -> int | None:
        """Renew a session's full TTL from now and return it; GONE if the session does
        not exist; None if this member cannot tell yet (a new leader still applying the
        log it inherited must not declare a live session gone)."""
        session = self.machine.sessions.get(session_id)
        if session is None:
            if not self.node.caught_up_leader:
                return None
            self.deadlines.pop(session_id, None)
            return GONE
        self._track(session_id, session, time.monotonic() + session.ttl_ms / 1000)
        return session.ttl_ms

    def remaining(self, session_id: int) -> int | None:
        """Milliseconds the session has left on this leader's clock (at least 1; its full
        TTL if not yet tracked), without renewing it; GONE / None as `keepalive`."""
        session = self.machine.sessions.get(session_id)
        if session is None:
            return GONE if self.node.caught_up_leader else None
        deadline = self._deadline(session_id, session)
        if deadline is None:
            return session.ttl_ms
        return max(1, int((deadline - time.monotonic()) * 1000))

    def _deadline(self, session_id: int, session: Session) -> float | None:
        """The tracked deadline if it is this session's (else it is forgotten)."""
        if self._owners.get(session_id) is not session:
            self.deadlines.pop(session_id, None)
            self._owners.pop(session_id, None)
            return None
        return self.deadlines.get(session_id)

    def _track(self, session_id: int, session: Session, deadline: float) -> None:
        self.deadlines[session_id] = deadline
        self._owners[session_id] = session
        heapq.heappush(self._heap, (deadline, session_id))

    def _forget_all(self) -> None:
        self.deadlines.clear()
        self._owners.clear()
        self._heap.clear()
        self._fresh.clear()

    def _restart_clocks(self, now: float) -> None:
        """Every live session gets its full TTL from now (one walk of all of them)."""
        self._forget_all()
        for session in self.machine.sessions.all():
            self.deadlines[session.id] = deadline = now + session.ttl_ms / 1000
            self._owners[session.id] = session
            self._heap.append((deadline, session.id))
        heapq.heapify(self._heap)

    def _due(self, now: float) -> list[int]:
        """Pop the sessions whose deadline passed (forgetting their deadlines)."""
        sessions, heap, due = self.machine.sessions, self._heap, []
        while heap and heap[0][0] <= now:
            deadline, sid = heapq.heappop(heap)
            if self.deadlines.get(sid) != deadline:
                continue  # renewed since, or forgotten
            session = self._owners.pop(sid, None)
            del self.deadlines[sid]
            if session is not None and sessions.get(sid) is session:
                due.append(sid)
        if len(heap) > 2 * len(self.deadlines) + 1024:  # mostly superseded entries
            self._heap = [(d, sid) for sid, d in self.deadlines.items()]
            heapq.heapify(self._heap)
        return due

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _sweep_logged(self) -> None:
        try:
            await self.sweep()
        except NodeError as e:
            log.warning("%s: session expiry deferred: %s", self.node.me.name, e)

    async def sweep(self) -> None:
        if not self.node.caught_up_leader:
            if not self.node.is_leader:
                self._forget_all()
                self._led_term = 0
            return  # a new leader expires nothing before it has applied what it inherited
        now = time.monotonic()
        stalled, self._last_sweep = now - self._last_sweep > STALL_S, now
        quorum_lost = self._quorum_losses != self.node.quorum_losses
        if self._led_term != self.node.term or stalled or quorum_lost:
            self._led_term = self.node.term
            self._quorum_losses = self.node.quorum_losses
            self._restart_clocks(now)  # every session gets its full TTL back
        sessions, fresh = self.machine.sessions, self._fresh
        while fresh:
            session = fresh.pop()
            if sessions.get(session.id) is session and self._owners.get(session.id) is not session:
                self._track(session.id, session, now + session.ttl_ms / 1000)
        expired = sorted(self._due(now))
        for i in range(0, len(expired), MAX_EXPIRE_IDS):
            chunk = tuple(expired[i:i + MAX_EXPIRE_IDS])
            log.info("%s: expiring sessions %s", self.node.me.name, list(chunk[:20]))
            try:
                await self.propose(ExpireSessions(chunk))
            except BaseException:
                for sid in expired[i:]:  # not expired yet: due again at the next sweep
                    session = sessions.get(sid)
                    if session is not None and sid not in self.deadlines:
                        self._track(sid, session, now)
                raise
