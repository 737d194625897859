"""Member-local read-only sessions (ZooKeeper's local sessions): how a client that starts
during a partition gets a session from the member it can reach.

A read-only member cannot open a session the usual way (that is a committed command),
so for a client that accepts read-only service it opens one here, in memory: an id drawn
at random from `LOCAL_SESSION_IDS` (a range the replicated allocator never reaches and
no client may ask for), kept alive by keepalives this member answers, expired by this
member's own clock after a TTL without one (restarted, as the leader's are, after this
process stalled: a SIGSTOP must not expire them). Nothing about it is replicated; it
can read, watch and hear mode changes, and every write through it is refused
(READ_ONLY) as any write here is.

When the member is read-write again it registers each live local session with the
cluster: a committed OpenSession asking for the session's own id (with the open's
request id, so a retry after a lost answer is answered from the state machine's memory).
The session's event stream then says `registered` and the session goes on as a cluster
session, same id, its TTL starting afresh on the leader. A refusal (SESSION_EXISTS: the
id was taken after all; LIMIT_EXCEEDED; ...), registration failing `MAX_ATTEMPTS`
times, or a retry answered after the cluster had expired what an earlier attempt
registered, ends it with `dropped` and the reason: two sessions never share an id, and a
session is never lost without its client being told why. What became of a session is
remembered (the last `OUTCOMES_KEPT`), so a client that reconnects its stream after the
fact still hears it."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from coord.server import log_lines
from coord.server.node.errors import NodeError
from coord.server.requests.coordinator import Coordinator
from coord.server.upkeep.mode import READ_WRITE, ModeChange
from coord.server.upkeep.periodic import Periodic
from coord.sm import commands as c
from coord.sm import limits
from coord.sm.errors import LIMIT_EXCEEDED, CommandError
from coord.sm.sessions import LOCAL_SESSION_IDS, check_open
from coord.wire import ApiError

log = logging.getLogger(__name__)

REGISTERED = "registered"
DROPPED = "dropped"
RELEASED = "released"  # closed by its client while still local (as a closed session's end)
ENDS = frozenset({DROPPED, RELEASED})

SWEEP_S = 0.25
STALL_S = 1.0  # a sweep this late means this process was not running (session_tracker's)
REGISTER_TIMEOUT_S = 5.0
REGISTER_CONCURRENCY = 32
MAX_ATTEMPTS = 5  # registrations that failed while the member was read-write
OUTCOMES_KEPT = 10_000
MAX_ID_DRAWS = 64


@dataclass(eq=False)
class LocalSession:
    id: int
    name: str
    ttl_ms: int
    request_id: str
    renewed_at: float  # this member's monotonic clock
    registering: bool = False
    attempts: int = 0
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    client_gave_id: bool = False  # request_id is the client's, not one made up here

    def log_fields(self) -> dict:
        """`extra=` for a line about this session: its open's request id, if the client
        gave one."""
        return log_lines.request(self.request_id if self.client_gave_id else None)


@dataclass(frozen=True, slots=True)
class LocalOutcome:
    """Member-local: what became of a local session (offered to its event stream)."""

    type: str  # registered | dropped | released
    session_id: int
    revision: int
    reason: str


class LocalSessions:
    """The member's local sessions. `offer` hands an outcome to the session's streams."""

    def __init__(
        self,
        coord: Coordinator,
        offer: Callable[[LocalOutcome], None],
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[int], int] = secrets.randbits,
    ) -> None:
        self.coord = coord
        self.offer = offer
        self.clock = clock
        self.draw = draw
        self._live: dict[int, LocalSession] = {}
        self._by_request: dict[str, int] = {}
        self._outcomes: OrderedDict[int, LocalOutcome] = OrderedDict()
        self._registering: asyncio.Task | None = None
        self._last_sweep = clock()
        self._sweeper = Periodic("local-sessions", SWEEP_S, self.sweep)
        coord.mode.listeners.append(self._mode_changed)

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: int) -> LocalSession | None:
        return self._live.get(session_id)

    def outcome(self, session_id: int) -> LocalOutcome | None:
        return self._outcomes.get(session_id)

    def start(self) -> None:
        self._sweeper.start()

    async def stop(self) -> None:
        await self._sweeper.stop()
        if self._registering is not None:
            self._registering.cancel()

    # -- what clients do -------------------------------------------------------------------

    def open(self, name: str, ttl_ms: int, request_id: str) -> LocalSession:
        """A new local session (CommandError for what no session may be opened with). A
        repeated request id gets the session it opened, while that is live."""
        known = self._live.get(self._by_request.get(request_id, 0)) if request_id else None
        if known is not None:
            return known
        check_open(name, ttl_ms, True)
        if len(self._live) + len(self.coord.machine.sessions) >= limits.MAX_SESSIONS:
            raise CommandError(LIMIT_EXCEEDED, f"{limits.MAX_SESSIONS} sessions are open "
                               "(local ones included): close unused ones first")
        session = LocalSession(self._new_id(), name, ttl_ms,
                               request_id or f"local-{uuid.uuid4().hex}", self.clock(),
                               client_gave_id=bool(request_id))
        self._live[session.id] = session
        self._by_request[session.request_id] = session.id
        log.info("%s: member-local session %d opened (%r, ttl %d ms)",
                 self._member, session.id, name, ttl_ms, extra=session.log_fields())
        return session

    def keepalive(self, session_id: int) -> int | None:
        """The TTL granted again from now, or None if it is not a live local session."""
        session = self._live.get(session_id)
        if session is None:
            return None
        session.renewed_at = self.clock()
        return session.ttl_ms

    async def close(self, session_id: int) -> str | None:
        """End a local session: RELEASED; REGISTERED if it became a cluster session first
        (the caller closes it the usual way); None if it is not a live local session."""
        session = self._live.get(session_id)
        if session is None:
            return None
        if session.registering:
            await session.settled.wait()  # bounded: a registration gives up in time
            done = self._outcomes.get(session_id)
            return REGISTERED if done is not None and done.type == REGISTERED else RELEASED
        self._settle(session, RELEASED, "closed by its client while member-local")
        return RELEASED

    # -- the member's side -----------------------------------------------------------------

    async def sweep(self) -> None:
        """Drop local sessions whose TTL ran out; register the rest once read-write."""
        now = self.clock()
        stalled, self._last_sweep = now - self._last_sweep > STALL_S, now
        for session in list(self._live.values()):
            if stalled:
                session.renewed_at = now  # its client could not reach us: a fresh TTL
            if not session.registering and now - session.renewed_at > session.ttl_ms / 1000:
                self._settle(session, DROPPED, (
                    f"member-local session {session.id} on {self._member} had no keepalive "
                    f"for its TTL ({session.ttl_ms / 1000:g}s); it was never registered"))
        self._kick()

    def _mode_changed(self, change: ModeChange) -> None:
        if change.mode == READ_WRITE:
            self._kick()

    def _kick(self) -> None:
        if not self._live or not self.coord.mode.serving_writes:
            return
        if self._registering is None or self._registering.done():
            self._registering = asyncio.get_running_loop().create_task(
                self._register_all(), name="local-sessions-register")

    async def _register_all(self) -> None:
        gate = asyncio.Semaphore(REGISTER_CONCURRENCY)

        async def one(session: LocalSession) -> None:
            async with gate:
                await self._register(session)

        pending = [s for s in self._live.values() if not s.registering]
        await asyncio.gather(*(one(s) for s in pending))

    async def _register(self, session: LocalSession) -> None:
        if session.id not in self._live or not self.coord.mode.serving_writes:
            return
        session.registering = True
        cmd = c.OpenSession(session.name, session.ttl_ms, True, session.request_id, session.id)
        try:
            res = await self.coord.write(cmd, timeout=REGISTER_TIMEOUT_S, local_apply=True)
        except (NodeError, ApiError) as e:
            session.registering = False
            if not self.coord.mode.serving_writes:
                return  # cut off again: it stays local, registered at the next return
            session.attempts += 1
            log.warning("%s: registering member-local session %d failed (%d of %d): %s",
                        self._member, session.id, session.attempts, MAX_ATTEMPTS, e,
                        extra=session.log_fields())
            if session.attempts >= MAX_ATTEMPTS:
                self._settle(session, DROPPED, (
                    f"member-local session {session.id} could not be registered with the "
                    f"cluster after {self._member} rejoined a majority ({MAX_ATTEMPTS} "
                    f"attempts; last: {e})"))
            return
        if res.error:
            self._settle(session, DROPPED, (
                f"member-local session {session.id} was refused by the cluster when "
                f"{self._member} rejoined a majority: {res.error}: {res.message}"),
                res.revision)
            return
        if res.session_id != session.id:  # its open's request id had opened another one
            self._settle(session, DROPPED, (
                f"member-local session {session.id} was not registered when {self._member} "
                f"rejoined a majority: its open's request id {session.request_id!r:.60} "
                f"had already opened session {res.session_id} in the cluster"), res.revision)
            return
        if session.id not in self.coord.machine.sessions:
            # an earlier attempt committed and its answer was lost; the retry is answered
            # from the machine's memory of the request id, but while this member retried,
            # the keepalives stayed here and the leader expired the cluster's copy
            self._settle(session, DROPPED, (
                f"member-local session {session.id} was registered, then expired by the "
                f"cluster before {self._member} heard the registration's answer (its "
                "keepalives did not reach the cluster meanwhile)"))
            return
        self._settle(session, REGISTERED, (
            f"member-local session {session.id} registered with the cluster (same id) "
            f"when {self._member} rejoined a majority"), res.revision)

    def _settle(self, session: LocalSession, kind: str, reason: str,
                revision: int | None = None) -> None:
        self._live.pop(session.id, None)
        self._by_request.pop(session.request_id, None)
        outcome = LocalOutcome(kind, session.id,
                               self.coord.machine.revision if revision is None else revision,
                               reason)
        self._outcomes[session.id] = outcome
        while len(self._outcomes) > OUTCOMES_KEPT:
            self._outcomes.popitem(last=False)
        session.settled.set()
        (log.info if kind != DROPPED else log.warning)("%s: %s", self._member, reason,
                                                       extra=session.log_fields())
        self.offer(outcome)

    def _new_id(self) -> int:
        """A random id in the local range that no session here or in the cluster has."""
        taken = self.coord.machine.sessions
        for _ in range(MAX_ID_DRAWS):
            sid = LOCAL_SESSION_IDS.start + self.draw(62)
            if sid not in self._live and sid not in taken and sid not in self._outcomes:
                return sid
        raise RuntimeError(f"no free local session id in {MAX_ID_DRAWS} draws")

    @property
    def _member(self) -> str:
        return self.coord.node.me.name


__all__ = ["DROPPED", "ENDS", "REGISTERED", "RELEASED", "LocalOutcome", "LocalSessions",
           "LocalSession"]
