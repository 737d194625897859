"""`AsyncSession`: a session kept alive in the background, on the client's event loop.

Two tasks per session: keepalives on a bidirectional stream (one every ttl/3, so two
lost keepalives are survivable) and the session's event stream. Both reconnect to the
next member on failure and keep the session id: a session outlives its connections.
The moment the session is known to be over (a severed/expired/released/closed event,
a keepalive answered `gone`, the server not knowing the id) it is fenced at once and its
owner told once. Where the news goes is the session's `SessionOutput`: here, an asyncio
queue and callbacks on the loop; the sync facade's `Session` supplies its own.

A member-local session (opened by a read-only member, `home`) lives on that member
alone, so both tasks stay there whatever the client's prober does, until the member
says `registered` (then it is a session like any other) or `dropped`. If the member
answers nothing for `LOCAL_GIVE_UP_TTLS` TTLs the session is over (`gone`, saying so).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc

from coord.client import calls
from coord.client.calls import ClaimLike, header_facts
from coord.client.errors import CoordError, SessionGoneError, error_for, from_rpc_error
from coord.client.keys import Bytesish
from coord.client.read_only import READ_WRITE, ModeChange
from coord.client.results import (
    OwnResult,
    PutResult,
    ReleaseResult,
    SessionEvent,
    session_event,
)
from coord.client.session_state import SessionCore, SessionFacts, SessionOutput, describe_end
from coord.client.transport import (
    BidiCall,
    CallCancelled,
    CallEnded,
    ClientLink,
    StreamCall,
    Transport,
    TransportClosed,
)
from coord.v1 import coord_pb2 as pb

__all__ = ["AsyncOutput", "AsyncSession", "Callback"]

log = logging.getLogger("coord.client")

Callback = Callable[[SessionEvent], Any]  # may return an awaitable (it is then scheduled)
Outcome = tuple[CoordError, bool] | None  # (error, made progress first), or None: done
Attempt = Callable[[int, Transport], Awaitable[Outcome]]

_END = object()
LOCAL_GIVE_UP_TTLS = 2
"""A member-local session whose member answers nothing for this many TTLs is taken for
gone. Its member drops it after one TTL without keepalives, unless the member's own
process was stopped: then it starts the TTL afresh (as a leader does), so one TTL of
silence alone does not prove the session over."""


class AsyncOutput:
    """A session's news for asyncio: events queued for `async for`, callbacks run on the
    loop (an awaitable a callback returns is scheduled as a task)."""

    def __init__(self, on_severed: Callback | None, on_event: Callback | None) -> None:
        self._on_severed = on_severed
        self._on_event = on_event
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._callbacks: set[asyncio.Task[Any]] = set()

    def fence(self) -> None:
        """Nothing more to do: `AsyncSession.fenced` is already set."""

    def deliver(self, event: SessionEvent, notify: bool) -> None:
        self._events.put_nowait(event)
        if notify:
            self._invoke(self._on_event, event)

    def finish(self, event: SessionEvent, report: bool) -> None:
        if report:
            self._invoke(self._on_severed, event)
        self._events.put_nowait(_END)  # last: once events() ends, the callback has run

    async def events(self, timeout: float | None) -> AsyncIterator[SessionEvent]:
        while True:
            try:
                item = await asyncio.wait_for(self._events.get(), timeout)
            except TimeoutError:
                return
            if item is _END:
                self._events.put_nowait(_END)  # so every other reader ends too
                return
            yield item

    def _invoke(self, callback: Callback | None, event: SessionEvent) -> None:
        if callback is None:
            return
        try:
            result = callback(event)
        except Exception:
            log.exception("coord: session callback failed")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(_logged(result))
            self._callbacks.add(task)
            task.add_done_callback(self._callbacks.discard)


class AsyncSession(SessionFacts):
    """A live session kept alive by an asyncio task (bidi keepalive stream) with another
    task reading its events; both reconnect to the next member and keep the session id.
    `fenced` (an asyncio.Event) is set and `on_severed(event)` called once the moment the
    session is known to be over. Create it inside a running loop. `output` replaces the
    queue and callbacks (the sync facade's Session passes its own)."""

    def __init__(
        self,
        client: ClientLink,
        session_id: int,
        ttl: float,
        name: str = "",
        on_severed: Callback | None = None,
        on_event: Callback | None = None,
        *,
        output: SessionOutput | None = None,
        home: str = "",
        start: bool = True,
    ) -> None:
        """`start=False`: the background tasks wait for `start()` (the sync facade starts
        them once its caller has the session, so the caller does not wait for the
        tasks' first steps to run on the loop before the open's answer reaches it)."""
        if output is not None and (on_severed is not None or on_event is not None):
            raise ValueError("give the callbacks to the output, not to the session")
        self.client = client
        self.core = SessionCore(session_id, ttl, name, local=bool(home))
        self.home = home  # the endpoint of the member holding a member-local session
        self.fenced = asyncio.Event()
        self._own_output: AsyncOutput | None = None
        if output is None:
            output = self._own_output = AsyncOutput(on_severed, on_event)
        self._output: SessionOutput = output
        self._stopping = False
        self._closed = False
        self._ka_call: BidiCall | None = None
        self._ev_call: StreamCall | None = None
        self._ev_index = -1
        client.mode_listeners.append(self._client_moved)
        client.sessions.add(self)
        self._tasks: list[asyncio.Task[None]] = []
        if start:
            self.start()

    def start(self) -> None:
        """Start keeping the session alive and reading its events (once; on the loop)."""
        if self._tasks:
            return
        if self._stopping:  # closed or detached before it started: nothing to keep
            self._forget()
            return
        self._tasks = [
            asyncio.create_task(self._keepalive_loop(), name=f"coord-keepalive-{self.id}"),
            asyncio.create_task(self._events_loop(), name=f"coord-events-{self.id}"),
        ]
        for task in self._tasks:
            task.add_done_callback(self._task_done)

    # -- conveniences bound to this session ---------------------------------------------
    async def own(self, group: str,
                  claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return await self.client.send(calls.own_call(self, group, claims))

    async def release(self, group: str, resources: Iterable[str] | str) -> ReleaseResult:
        return await self.client.send(calls.release_call(self, group, resources))

    async def put(self, key: Bytesish, value: Bytesish, *, prev_kv: bool = False) -> PutResult:
        """A key deleted when this session ends."""
        return await self.client.send(calls.put_call(key, value, session=self, prev_kv=prev_kv))

    async def events(self, timeout: float | None = None) -> AsyncIterator[SessionEvent]:
        """The session's events as they arrive; ends when the session ends (or after
        `timeout` seconds without one)."""
        if self._own_output is None:
            raise TypeError("this session's events are read through the sync Session")
        async for event in self._own_output.events(timeout):
            yield event

    # -- background tasks ---------------------------------------------------------------
    async def _stay_connected(self, what: str, attempt: Attempt) -> None:
        """Run `attempt` on the current member until it says the loop is done (None);
        after an error, unless it ends the session, the next member after a pause. Keep
        trying for as long as it takes: a new leader restarts every session's clock, so
        the session can survive even a whole-cluster outage."""
        failures = 0
        ring = self.client.ring
        while not self._stopping:
            try:
                local = self.core.local
                index, transport = self._member()
                outcome = await attempt(index, transport)
            except (CoordError, TransportClosed):  # CoordError: current() said closed
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            if outcome is None or self._stopping:
                return
            err, progressed = outcome
            if isinstance(err, SessionGoneError):
                self._end(self.core.gone(err.message), queue_it=True)
                return
            failures = 1 if progressed else failures + 1
            log.debug("session %d %s on %s failed (%s); reconnecting",
                      self.id, what, ring.endpoints[index], err.reason)
            if not local:
                ring.failed(index)
            elif self.core.unanswered_for() > LOCAL_GIVE_UP_TTLS * self.ttl:
                self._end(self.core.gone(
                    f"member-local session: its member at {self.home} answered nothing for "
                    f"{LOCAL_GIVE_UP_TTLS} TTLs ({LOCAL_GIVE_UP_TTLS * self.ttl:g}s), and the "
                    "session lived there alone"), queue_it=True)
                return
            await asyncio.sleep(self.client.policy.delay(failures, len(ring)))

    def _member(self) -> tuple[int, Transport]:
        """Where the session's streams go: a member-local session's member, else the
        client's current member."""
        if self.core.local:
            return self.client.ring.endpoints.index(self.home), self.client.transport(self.home)
        return self.client.current()

    async def _keepalive_loop(self) -> None:
        await self._stay_connected("keepalive", self._keepalive)

    async def _events_loop(self) -> None:
        await self._stay_connected("event stream", self._read_events)

    async def _keepalive(self, index: int, transport: Transport) -> Outcome:
        """Keepalives on one member, one per interval, until the stream fails (the error,
        and whether any keepalive was answered) or the session ends (None)."""
        answered = False
        err: CoordError
        try:
            call = transport.bidi_stream("Sessions", "KeepAlive", metadata=self.client.metadata)
            self._ka_call = call
            while not self._stopping:
                sent_at = time.monotonic()
                await call.write(self.core.request())
                try:
                    response = await asyncio.wait_for(call.read(), self.core.interval)
                except TimeoutError:  # the member is stuck (e.g. paused): move on
                    call.cancel()
                    err = error_for("STALLED", "keepalive unanswered",
                                    grpc.StatusCode.DEADLINE_EXCEEDED)
                    break
                if response is None:
                    err = error_for("STREAM_ENDED", "keepalive stream ended",
                                    grpc.StatusCode.UNAVAILABLE)
                    break
                answered = True
                ended = self.core.acked(sent_at, response)
                if response.read_only:  # the member that said so, its term and revision
                    self.client.saw_read_only(*header_facts(response.header))
                if ended is not None:
                    self._end(ended, queue_it=True)
                    return None
                await asyncio.sleep(max(0.0, self.core.interval - (time.monotonic() - sent_at)))
            else:
                return None
        except CallCancelled:
            err = error_for("CANCELLED", "keepalive cancelled", grpc.StatusCode.CANCELLED)
        except CallEnded:
            err = error_for("STREAM_ENDED", "keepalive stream ended", grpc.StatusCode.UNAVAILABLE)
        except grpc.RpcError as e:
            err = from_rpc_error(e)
        if self._ev_call is not None and self._ev_index == index:
            self._ev_call.cancel()  # the member is stuck: move the event stream too
        return err, answered

    async def _read_events(self, index: int, transport: Transport) -> Outcome:
        """The session's event stream on one member, until it fails (the error, and
        whether an event came) or the session ends (None)."""
        delivered = False
        try:
            call = transport.server_stream(
                "Sessions", "Events", pb.SessionEventsRequest(session_id=self.id),
                metadata=self.client.metadata)
            self._ev_call, self._ev_index = call, index
            while (pb_event := await call.read()) is not None:
                delivered = True
                self._deliver(session_event(pb_event))
                if self.core.ended is not None:
                    return None
        except CallCancelled:
            return error_for("CANCELLED", "event stream cancelled",
                             grpc.StatusCode.CANCELLED), delivered
        except grpc.RpcError as e:
            return from_rpc_error(e), delivered
        if not self._stopping:  # the stream ends when the session ends
            self._end(self.core.gone("the session's event stream ended"), queue_it=True)
        return None

    def _client_moved(self, change: ModeChange) -> None:
        """The client found a read-write member: say so, and move the streams there. Not
        a member-local session: its member holds it, and says when that changes."""
        if self.core.local:
            return
        event = self.core.moved(change)
        if event is not None:
            self._deliver(event)
        if change.moved:
            for call in (self._ka_call, self._ev_call):
                if call is not None:
                    call.cancel()  # each loop reconnects to the (new) current member

    def heard_read_only(self, member: str, term: int = 0, revision: int = 0) -> None:
        """The client got an answer from a read-only member (any call, any stream): say
        mode_changed now if this session has not heard it from the member yet."""
        event = self.core.entered_read_only(member, term, revision)
        if event is not None:
            self.core.observe(event)
            self._output.deliver(event, notify=True)

    def _deliver(self, event: SessionEvent) -> None:
        if self.core.already_told(event):
            return
        terminal = self.core.observe(event)
        self._output.deliver(event, notify=True)
        if event.type == "mode_changed" and event.mode != READ_WRITE:
            self.client.saw_read_only(event.member)  # the client's other sessions too
        if terminal:
            self._end(event)

    def _end(self, event: SessionEvent, queue_it: bool = False) -> None:
        """The session is over: fence, stop, tell. `queue_it` for ends the client made up
        (server events are queued on arrival)."""
        if not self.core.end(event):
            return
        self.fenced.set()  # first: whatever a callback does, the owner is fenced
        self._output.fence()
        self._stopping = True
        if queue_it:
            self._output.deliver(event, notify=False)
        for call in (self._ka_call, self._ev_call):
            if call is not None:
                call.cancel()
        report = self.core.report_loss
        if report:
            log.warning("coord: %s", describe_end(event))
        self._output.finish(event, report)

    def _task_done(self, _: asyncio.Task[None]) -> None:
        """Once both tasks ended, the client need not know the session any more."""
        if all(task.done() for task in self._tasks):
            self._forget()

    def _forget(self) -> None:
        self.client.sessions.discard(self)
        if self._client_moved in self.client.mode_listeners:
            self.client.mode_listeners.remove(self._client_moved)

    # -- closing ------------------------------------------------------------------------
    async def close(self, timeout: float = 2.0) -> None:
        """End the session on the server (everything it holds is released at once) and
        stop the tasks. Idempotent; a session already gone closes quietly."""
        if self._closed:
            return
        self._closed = True
        self.core.closing = True
        self._stopping = True
        error: CoordError | None = None
        if self.core.ended is None:
            try:
                if self.core.local:
                    await self._close_local()
                else:
                    await self.client.send(calls.close_session_call(self.id))
            except SessionGoneError:
                pass
            except CoordError as e:
                error = e  # it expires after its TTL anyway; report after cleaning up
        self._end(SessionEvent("closed", self.id, message="closed by this client"),
                  queue_it=True)
        await self._stop_tasks(timeout)
        if error is not None:
            raise error

    async def _close_local(self) -> None:
        """Close a member-local session on its member (no other knows it)."""
        call = calls.close_session_call(self.id)
        try:
            await self.client.transport(self.home).unary(
                call.service, call.method, call.request, timeout=self.client.timeout,
                metadata=self.client.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        except (CallCancelled, TransportClosed):
            raise error_for("CANCELLED", "closing the member-local session was cut short",
                            grpc.StatusCode.CANCELLED) from None

    async def detach(self, timeout: float = 2.0) -> None:
        """Stop keeping the session alive WITHOUT closing it (it expires after its TTL
        unless someone else keeps it alive)."""
        self._closed = True
        self.core.closing = True
        self._stopping = True
        for call in (self._ka_call, self._ev_call):
            if call is not None:
                call.cancel()
        await self._stop_tasks(timeout)

    async def client_closed(self) -> None:
        """The client is closing: nothing keeps the session alive any more, so it ends
        now (`gone`; reported unless it was being closed or detached anyway)."""
        self._end(self.core.gone("the client was closed"), queue_it=True)
        await self._stop_tasks(1.0)

    async def _stop_tasks(self, timeout: float) -> None:
        me = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not me and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            await self.close()
        except CoordError:
            if exc_type is None:
                raise
            log.warning("coord: closing session %d failed", self.id, exc_info=True)


async def _logged(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("coord: session callback failed")
