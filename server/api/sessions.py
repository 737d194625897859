"""The Sessions service: open/close, keepalive (to the leader, never replicated) and
each session's event stream. On a read-only member, a client that accepts read-only
service gets a member-local session instead (server/requests/local_sessions.py): this
member opens, renews and closes it, and its stream says what became of it.

While auth is on, using a session (its keepalives, its event stream) and opening or
closing a member-local one need WRITE on the session's name (`coord.sm.access.
session_use`), as opening it through the log does; a refusal ends the call with
PERMISSION_DENIED naming the permission. A follower catches up before it forwards a
keepalive for a session it does not know, so that one is checked too."""

from __future__ import annotations

import asyncio
import logging

import grpc

from coord.server.api.common import Caller, admit_reader, require, write
from coord.server.api.errors import abort, abort_node_error
from coord.server.node.errors import NodeError
from coord.server.requests import liveness
from coord.server.requests.coordinator import Coordinator
from coord.server.requests.events import EventHub
from coord.server.requests.liveness import GONE
from coord.server.requests.local_sessions import ENDS, REGISTERED, LocalOutcome, LocalSessions
from coord.server.upkeep.mode import READ_WRITE, ModeChange
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm import commands as c
from coord.sm.access import session_use
from coord.sm.errors import CommandError
from coord.sm.records import SessionEvent
from coord.sm.sessions import is_local_session_id
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc
from coord.wire import ApiError, result_code

log = logging.getLogger(__name__)

KEEPALIVE_FORWARD_TIMEOUT_S = 0.25  # well under a keepalive interval (>= TTL/3 >= 0.33 s)
MAX_FORWARDS_PER_STREAM = 256
ENDING_EVENTS = frozenset({"severed", "expired", "released"})


def _renewed(sid: int, ttl: int | None) -> pb.KeepAliveResponse:
    if ttl is None:
        # No leader answered in time: say so at once, so the client does not take this
        # live member for a stuck one and move off it.
        return pb.KeepAliveResponse(session_id=sid, pending=True)
    return pb.KeepAliveResponse(session_id=sid, ttl_ms=max(ttl, 0), gone=ttl == GONE)


class _Answers:
    """A keepalive stream's writes, one at a time: the reader's own answers, and the
    forwarded ones as their futures complete, written by one writer task (made at the
    first forward) rather than a task per keepalive."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context
        self._lock = asyncio.Lock()
        self._out = 0  # forwarded, not yet written
        self._ready: asyncio.Queue[pb.KeepAliveResponse] = asyncio.Queue()
        self._written = asyncio.Event()
        self._writer: asyncio.Task | None = None

    async def write(self, answer: pb.KeepAliveResponse) -> None:
        async with self._lock:
            await self._context.write(answer)

    async def room(self) -> None:
        """Wait while MAX_FORWARDS_PER_STREAM forwarded answers are still to write."""
        while self._out >= MAX_FORWARDS_PER_STREAM:
            self._written.clear()
            await self._written.wait()

    def forwarded(self, sid: int, ttl: asyncio.Future[int | None]) -> None:
        self._out += 1
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_forwarded())
        ttl.add_done_callback(lambda f: self._ready.put_nowait(
            _renewed(sid, None if f.cancelled() else f.result())))

    async def _write_forwarded(self) -> None:
        while True:
            answer = await self._ready.get()
            try:
                await self.write(answer)
            except Exception:  # the stream broke: its reader ends too; count it written
                pass
            finally:
                self._out -= 1
                self._written.set()

    async def drained(self) -> None:
        """Every forwarded answer written (the client closed its side)."""
        while self._out:
            self._written.clear()
            await self._written.wait()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()


def session_event_to_pb(e: SessionEvent) -> pb.SessionEvent:
    return pb.SessionEvent(
        type=e.type,
        session_id=e.session_id,
        revision=e.revision,
        group=e.group,
        resource=e.resource,
        generation=e.generation,
        new_owner=e.new_owner,
        resources=[claim.resource for claim in e.claims],
    )


class SessionsService(coord_pb2_grpc.SessionsServicer):
    def __init__(self, coord: Coordinator, hub: EventHub, tracker: SessionTracker,
                 local: LocalSessions) -> None:
        self.coord = coord
        self.hub = hub
        self.tracker = tracker
        self.local = local

    async def OpenSession(self, request, context):  # noqa: N802
        if self._opens_locally(request):
            return await self._open_local(request, context)
        # (If the member goes read-only while this waits, the open is refused READ_ONLY:
        # not applied, so the client opens again, and gets a local session.)
        cmd = c.OpenSession(request.name, request.ttl_ms, request.read_only_ok, request.request_id)
        res = await write(context, self.coord, cmd)
        return pb.OpenSessionResponse(
            header=self.coord.header(res.revision), session_id=res.session_id, ttl_ms=res.ttl_ms
        )

    def _opens_locally(self, request: pb.OpenSessionRequest) -> bool:
        """ZooKeeper's rule: a read-only member serves read-only clients (the session's
        handshake flag) and only them."""
        return request.read_only_ok and self.coord.mode.read_only

    async def _open_local(self, request, context) -> pb.OpenSessionResponse:
        await self._may_use(context, request.name)
        try:
            session = self.local.open(request.name, request.ttl_ms, request.request_id)
        except CommandError as e:
            await abort(context, result_code(e.code), e.code, e.message)
        return pb.OpenSessionResponse(header=self.coord.header(), session_id=session.id,
                                      ttl_ms=session.ttl_ms, local=True)

    async def CloseSession(self, request, context):  # noqa: N802
        local = self.local.get(request.session_id)
        if local is not None:
            await self._may_use(context, local.name)
        if await self.local.close(request.session_id) in ENDS:
            return pb.CloseSessionResponse(header=self.coord.header())
        res = await write(context, self.coord, c.CloseSession(request.session_id))
        return pb.CloseSessionResponse(header=self.coord.header(res.revision))

    async def KeepAlive(self, request_iterator, context):  # noqa: N802
        """Each keepalive answered as soon as it is settled, naming its session. Here
        (a local session, a read-only member, the leader) that is at once and in order;
        a follower asks the leader, and those asks do not hold up the stream: up to
        MAX_FORWARDS_PER_STREAM are out at once (a client multiplexing many sessions'
        keepalives on one stream would otherwise get one leader round trip per
        keepalive), their answers written as they come back."""
        out = _Answers(context)
        caller = Caller.of(context)  # its user is found once, for every keepalive
        try:
            async for req in request_iterator:
                sid = req.session_id
                name = self._name_of(sid)
                await self._may_use(context, name, caller)
                answer = await self._answer_here(sid, context)
                if answer is None and name is None and self.coord.machine.auth.enabled:
                    answer = await self._unknown_here(sid, context, caller)
                if answer is not None:
                    await out.write(answer)
                    continue
                await out.room()
                out.forwarded(sid, liveness.renew_soon(
                    self.coord, self.tracker, sid, timeout=KEEPALIVE_FORWARD_TIMEOUT_S))
            await out.drained()
        finally:
            out.close()

    async def _answer_here(self, sid: int, context) -> pb.KeepAliveResponse | None:
        """The answer this member gives by itself, or None: ask the leader."""
        ttl = self.local.keepalive(sid)
        if ttl is not None:  # renewed by this member: the session lives here
            read_only = not self.coord.mode.serving_writes
            return pb.KeepAliveResponse(session_id=sid, ttl_ms=ttl, local=True,
                                        read_only=read_only,
                                        header=self.coord.header() if read_only else None)
        if self._lost_local(sid):
            return pb.KeepAliveResponse(session_id=sid, gone=True)
        if await admit_reader(context, self.coord, sid):
            # Read-only: no leader can renew it; say so instead of pretending.
            session = self.coord.machine.sessions.get(sid)
            return pb.KeepAliveResponse(session_id=sid, ttl_ms=session.ttl_ms if session else 0,
                                        read_only=True, header=self.coord.header())
        if self.coord.node.is_leader:
            return _renewed(sid, self.tracker.keepalive(sid))
        return None

    async def _unknown_here(self, sid: int, context, caller: Caller) -> pb.KeepAliveResponse | None:
        """While auth is on, a session this follower does not know (it may lag behind
        the open) is not forwarded unchecked: the leader renews by id alone. Caught up,
        the member checks it as a known one (None: forward it), or answers it gone, as
        the leader would (its open, acknowledged only once committed, is applied here
        by then); a member that cannot catch up in time answers pending, as when no
        leader answers, and the client sends again."""
        try:
            await self.coord.barrier(KEEPALIVE_FORWARD_TIMEOUT_S)
        except NodeError:
            return _renewed(sid, None)
        name = self._name_of(sid)
        if name is None:
            return pb.KeepAliveResponse(session_id=sid, gone=True)
        await self._may_use(context, name, caller)
        return None

    def _name_of(self, sid: int) -> str | None:
        """The name of session `sid` as this member knows it (None: it knows none)."""
        session = self.local.get(sid) or self.coord.machine.sessions.get(sid)
        return session.name if session is not None else None

    async def _may_use(self, context, name: str | None, caller: Caller | None = None) -> None:
        """Abort the call unless its caller may use a session named `name` (None: a
        session this member does not know; what answers for it says so)."""
        if name is None or not self.coord.machine.auth.enabled:
            return
        try:
            await require(self.coord, caller or Caller.of(context), session_use(name))
        except ApiError as e:
            await e.abort(context)

    def _lost_local(self, sid: int) -> bool:
        """A local session this member dropped or closed (a member that restarted knows
        nothing of its local sessions: the leader, or the event stream, says they are
        gone)."""
        outcome = self.local.outcome(sid)
        return outcome is not None and outcome.type in ENDS

    async def Events(self, request, context):  # noqa: N802
        sid = request.session_id
        caller = Caller.of(context)
        await self._may_use(context, self._name_of(sid), caller)  # a session known here
        sub = self.hub.watch_session(sid)
        try:
            # A live local session here, or one whose fate this member knows: say so.
            told = self._local_start(sid) if is_local_session_id(sid) else None
            if told is not None:
                yield told
                if told.type in ENDS:
                    return
            elif await admit_reader(context, self.coord, sid):
                yield self._mode_event(sid, self.coord.mode.mode)  # where it stands now
            else:
                # Linearizable existence check: a lagging member must not call a new
                # session gone.
                try:
                    await self.coord.barrier(timeout=2.0)
                except NodeError as e:
                    # Cut off while checking: the member switched modes meanwhile (the
                    # change waits in `sub`). A caller it may serve read-only hears of it
                    # next, rather than meeting the refusal and coming back only after
                    # its retry pause (~300 ms late).
                    if not await admit_reader(context, self.coord, sid):
                        await abort_node_error(context, e)
            if self.local.get(sid) is None and sid not in self.coord.machine.sessions:
                await abort(context, grpc.StatusCode.NOT_FOUND, "UNKNOWN_SESSION",
                            self._unknown(sid))
            await self._may_use(context, self._name_of(sid), caller)  # known once caught up
            told_registered = told is not None and told.type == REGISTERED
            while True:
                event = await sub.queue.get()
                if sub.overflowed or event is None:
                    return
                if isinstance(event, ModeChange):
                    if event.mode != READ_WRITE and self.local.get(sid) is None:
                        await admit_reader(context, self.coord, sid)  # or NO_QUORUM: move on
                    yield self._mode_event(sid, event.mode, event)
                    continue
                if isinstance(event, LocalOutcome):
                    if event.type != REGISTERED or not told_registered:
                        yield self._outcome_event(event)
                    if event.type in ENDS:
                        return
                    told_registered = True
                    continue
                yield session_event_to_pb(event)
                if event.type in ENDING_EVENTS:
                    return
        finally:
            self.hub.cancel(sub)

    def _local_start(self, sid: int) -> pb.SessionEvent | None:
        """The first event of a local-range session's stream on this member: where the
        member stands (a live local session here) or what became of it (registered,
        dropped, closed); None if this member knows neither."""
        if self.local.get(sid) is not None:
            return self._mode_event(sid, self.coord.mode.mode)
        outcome = self.local.outcome(sid)
        return None if outcome is None else self._outcome_event(outcome)

    def _unknown(self, sid: int) -> str:
        if is_local_session_id(sid):
            return (f"session {sid} is a member-local session that member "
                    f"{self.coord.node.me.name} does not hold and the cluster does not know "
                    "(opened on another member, dropped, or held by a member that restarted: "
                    "local sessions live in their member's memory)")
        return f"session {sid} does not exist (expired, closed or severed)"

    def _outcome_event(self, outcome: LocalOutcome) -> pb.SessionEvent:
        return pb.SessionEvent(type=outcome.type, session_id=outcome.session_id,
                               revision=outcome.revision, member=self.coord.node.me.name,
                               term=self.coord.node.term, reason=outcome.reason)

    def _mode_event(self, sid: int, mode: str, change: ModeChange | None = None) -> pb.SessionEvent:
        coord = self.coord
        return pb.SessionEvent(
            type="mode_changed",
            session_id=sid,
            mode=mode,
            member=coord.node.me.name,
            term=change.term if change else coord.node.term,
            revision=change.revision if change else coord.machine.revision,
        )


__all__ = ["SessionsService"]
