"""The asyncio client: the same surface as `sync.Client` on grpc.aio.

Everything that is not I/O (requests, conversion, the failover and retry policy, watch
and session bookkeeping) is shared with the sync client through `_common`; this module
only awaits. Channels are created lazily on the running loop, so construct the client
anywhere but use it from one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio

from coord.client import _common as c
from coord.client._common import (
    Bytesish,
    CasResult,
    ClaimLike,
    DeleteResult,
    Header,
    KeyValue,
    OwnerChange,
    OwnResult,
    PidBlock,
    PidLease,
    Producer,
    PutResult,
    RangeResult,
    ReleaseResult,
    RetryPolicy,
    SessionEvent,
    SessionInfo,
    SessionRef,
    TxnResult,
    WatchEvent,
)
from coord.client.errors import CoordError, SessionGoneError, error_for, from_rpc_error

log = logging.getLogger("coord.client")

T = TypeVar("T")

Callback = Callable[[SessionEvent], Any]  # may return an awaitable (it is then scheduled)

_END = object()


def _call_cancelled() -> bool:
    """Inside `except asyncio.CancelledError`: True if only the gRPC call was cancelled
    (grpc.aio raises CancelledError for that too), False if our task is being cancelled."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


class AsyncClient:
    """An asyncio client of a coord cluster; `async with AsyncClient(...) as client:`.
    Same policy as `Client`: bounded failover, only safe requests repeated."""

    def __init__(
        self,
        endpoints: Sequence[str] | str | None = None,
        timeout: float = 5.0,
        read_only_ok: bool = False,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.ring = c.EndpointRing(c.parse_endpoints(endpoints))
        self.timeout = timeout
        self.read_only_ok = read_only_ok
        self.policy = policy or RetryPolicy()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, c.Stubs] = {}
        self._closed = False
        self.metadata = c.READ_ONLY_OK_METADATA if read_only_ok else ()
        self.mode_listeners: list[Callable[[c.ModeChange], Any]] = []
        self._probe_task: asyncio.Task[None] | None = None

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self.ring.endpoints

    def add_mode_listener(self, listener: Callable[[c.ModeChange], Any]) -> None:
        """Called when the client finds a read-write member (see Client)."""
        self.mode_listeners.append(listener)

    def saw_read_only(self) -> None:
        """A member answered read-only: look for a read-write one in the background."""
        if self.read_only_ok and not self._closed and (
            self._probe_task is None or self._probe_task.done()
        ):
            self._probe_task = asyncio.get_running_loop().create_task(
                self._probe_loop(), name="coord-probe"
            )

    async def _probe_loop(self) -> None:
        """Client._Prober's loop, as a task: ends once a read-write member is current."""
        round_ = 0
        while not self._closed:
            await asyncio.sleep(c.probe_pause(round_))
            round_ += 1
            for index in c.probe_order(self.ring):
                endpoint = self.ring.endpoints[index]
                try:
                    stubs = self._channel(endpoint)[1]
                    status = await stubs.Admin.Status(c.STATUS_REQUEST, timeout=c.PROBE_TIMEOUT)
                except (grpc.RpcError, CoordError, grpc.aio.UsageError):
                    continue
                if not c.is_read_write(status):
                    continue
                c.move_to_read_write(self.ring, self.mode_listeners, index, status.name)
                return

    # -- plumbing -----------------------------------------------------------------------
    def _channel(self, endpoint: str) -> tuple[grpc.aio.Channel, c.Stubs]:
        if self._closed:
            raise error_for("CLOSED", "the client is closed", grpc.StatusCode.CANCELLED)
        ch = self._channels.get(endpoint)
        if ch is None:
            ch = grpc.aio.insecure_channel(endpoint, options=c.CHANNEL_OPTIONS)
            self._channels[endpoint] = ch
            self._stubs[endpoint] = c.Stubs(ch)
        return ch, self._stubs[endpoint]

    def current(self) -> tuple[int, c.Stubs]:
        index, endpoint = self.ring.current()
        return index, self._channel(endpoint)[1]

    async def _run(self, call: c.Call[T]) -> T:
        attempts = c.Attempts(self.policy, len(self.ring), self.timeout)
        while True:
            index, endpoint = self.ring.current()
            channel, stubs = self._channel(endpoint)
            try:
                if not call.safe:
                    await self._ensure_ready(channel, attempts.call_timeout())
                response = await stubs.method(call.service, call.method)(
                    call.request, timeout=attempts.call_timeout(), metadata=self.metadata
                )
                if c.served_read_only(response):
                    self.saw_read_only()
                return c.finish(call, response, self.read_only_ok)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except CoordError as e:
                err = e
            except grpc.aio.UsageError:  # the channel was closed under us
                if self._closed:
                    raise error_for("CLOSED", "the client is closed",
                                    grpc.StatusCode.CANCELLED) from None
                raise
            if err.reason == "READ_ONLY":
                self.saw_read_only()
            delay = attempts.next_delay(err, call.safe)
            if delay is None:
                raise attempts.final(err)
            log.debug("%s.%s on %s failed (%s); trying the next member",
                      call.service, call.method, endpoint, err.reason)
            self.ring.failed(index)
            await asyncio.sleep(delay)

    @staticmethod
    async def _ensure_ready(channel: grpc.aio.Channel, timeout: float) -> None:
        """See Client._ensure_ready: a channel that never connected proves not sent."""
        try:
            await asyncio.wait_for(channel.channel_ready(), min(timeout, 1.0))
        except TimeoutError:
            raise error_for("NOT_CONNECTED", "could not connect") from None

    # -- KV -----------------------------------------------------------------------------
    async def put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                  prev_kv: bool = False) -> PutResult:
        return await self._run(c.put_call(key, value, session=session, prev_kv=prev_kv))

    async def get(self, key: Bytesish, *, revision: int = 0,
                  serializable: bool = False) -> KeyValue | None:
        return await self._run(c.get_call(key, revision=revision, serializable=serializable))

    async def range(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, limit: int = 0, revision: int = 0,
                    serializable: bool = False) -> RangeResult:
        return await self._run(c.range_call(key, range_end, prefix=prefix, limit=limit,
                                            revision=revision, serializable=serializable))

    async def delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                     prefix: Bytesish | None = None, prev_kv: bool = False) -> DeleteResult:
        return await self._run(c.delete_call(key, range_end, prefix=prefix, prev_kv=prev_kv))

    def txn(self) -> AsyncTxn:
        """`await client.txn().if_version(k, "=", 0).then_put(k, v).commit()`"""
        return AsyncTxn(self)

    async def put_if_absent(self, key: Bytesish, value: Bytesish, *,
                            session: SessionRef | None = None) -> CasResult:
        return await self._run(c.put_if_absent_call(key, value, session=session))

    async def compare_and_set(self, key: Bytesish, expected_version: int, value: Bytesish, *,
                              session: SessionRef | None = None) -> CasResult:
        return await self._run(
            c.compare_and_set_call(key, expected_version, value, session=session))

    async def compact(self, revision: int) -> Header:
        return await self._run(c.compact_call(revision))

    def watch(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, from_revision: int = 0,
              prev_kv: bool = False) -> AsyncStream[WatchEvent]:
        """`async for event in client.watch(prefix="jobs/"):` — resumes across members."""
        k, end = c.key_range(key, range_end, prefix)
        return AsyncStream(self, c.WatchCursor(k, end, from_revision, prev_kv))

    # -- producer ids -------------------------------------------------------------------
    async def allocate_pid_block(self, requester: str = "", size: int = 1000) -> PidBlock:
        return await self._run(c.allocate_pid_block_call(requester, size))

    async def lease_pid(self, topic: str, partition: int, pid: int = -1) -> PidLease:
        return await self._run(c.lease_pid_call(topic, partition, pid))

    async def init_producer(self, producer_key: str) -> Producer:
        return await self._run(c.init_producer_call(producer_key))

    async def check_producer(self, producer_key: str, pid: int, generation: int) -> Header:
        return await self._run(c.check_producer_call(producer_key, pid, generation))

    # -- ownership ----------------------------------------------------------------------
    async def own(self, session: SessionRef, group: str,
                  claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return await self._run(c.own_call(session, group, claims))

    async def release(self, session: SessionRef, group: str,
                      resources: Iterable[str] | str) -> ReleaseResult:
        return await self._run(c.release_call(session, group, resources))

    async def get_owner(self, group: str, resource: str, *,
                        serializable: bool = False) -> c.Owner:
        return await self._run(c.get_owner_call(group, resource, serializable))

    async def list_owners(self, group: str, prefix: str = "", *,
                          serializable: bool = False) -> tuple[c.Owner, ...]:
        return await self._run(c.list_owners_call(group, prefix, serializable))

    def watch_owners(self, group: str, prefix: str = "", *,
                     from_revision: int = 0) -> AsyncStream[OwnerChange]:
        """See Client.watch_owners: a listing then changes, or a replay from
        `from_revision` then changes."""
        return AsyncStream(self, c.OwnersCursor(group, prefix, from_revision))

    # -- sessions -----------------------------------------------------------------------
    async def open_session(self, name: str = "", ttl: float = 10.0,
                           read_only_ok: bool | None = None) -> SessionInfo:
        ok = self.read_only_ok if read_only_ok is None else read_only_ok
        return await self._run(c.open_session_call(name, ttl, ok))

    async def close_session(self, session: SessionRef) -> Header:
        return await self._run(c.close_session_call(session))

    def session(
        self,
        name: str = "",
        ttl: float = 10.0,
        on_severed: Callback | None = None,
        on_event: Callback | None = None,
        read_only_ok: bool | None = None,
    ) -> SessionOpener:
        """`async with client.session(ttl=10) as s:` or `s = await client.session()`."""
        return SessionOpener(self, name, ttl, on_severed, on_event, read_only_ok)

    async def attach(self, session_id: int, ttl: float = 10.0,
                     on_severed: Callback | None = None,
                     on_event: Callback | None = None) -> AsyncSession:
        """Keep an existing session alive (see Client.attach)."""
        return AsyncSession(self, session_id, ttl, on_severed=on_severed, on_event=on_event)

    # -- lifecycle ----------------------------------------------------------------------
    async def close(self) -> None:
        self._closed = True
        if self._probe_task is not None:
            self._probe_task.cancel()
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        for ch in channels:
            await ch.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncTxn(c.TxnBuilder):
    def __init__(self, client: AsyncClient) -> None:
        super().__init__()
        self._client = client

    async def commit(self) -> TxnResult:
        return await self._client._run(c.txn_call(self.build()))


class AsyncStream(Generic[T]):
    """An async iterator over a server stream that reopens itself on the next member
    after a failure (bounded consecutive failures); `cancel()` ends it."""

    def __init__(self, client: AsyncClient, cursor: c.Cursor[T]) -> None:
        self._client = client
        self._cursor = cursor
        self._call: Any = None
        self._index = 0
        self._pending: collections.deque[T] = collections.deque()
        self._failures = 0
        self._cancelled = False

    def __aiter__(self) -> AsyncStream[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._cancelled:
                raise StopAsyncIteration
            try:
                if self._call is None:
                    await self._open()
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    self._call = None
                    await self._failed(error_for("STREAM_ENDED", "the server ended the stream",
                                                 grpc.StatusCode.UNAVAILABLE))
                    continue
            except asyncio.CancelledError:
                self._call = None
                if self._cancelled:
                    raise StopAsyncIteration from None
                if not _call_cancelled():
                    raise
                await self._failed(error_for("CANCELLED", "stream cancelled",
                                             grpc.StatusCode.CANCELLED))
                continue
            except grpc.RpcError as e:
                self._call = None
                if self._cancelled:
                    raise StopAsyncIteration from None
                await self._failed(from_rpc_error(e))
                continue
            self._failures = 0
            if c.served_read_only(response):
                self._client.saw_read_only()
            try:
                self._pending.extend(self._cursor.feed(response))
            except CoordError:
                self.cancel()
                raise

    async def _pin(self) -> None:
        """Resolve where the stream starts (a watch "from now": the current revision + 1)."""
        start = self._cursor.start_call()
        if start is not None:
            self._cursor.started(await self._client._run(start))

    async def _open(self) -> None:
        await self._pin()
        self._index, stubs = self._client.current()
        self._call = stubs.method(self._cursor.service, self._cursor.method)(
            self._cursor.request(), metadata=self._client.metadata)

    async def _failed(self, err: CoordError) -> None:
        if not self._cursor.on_error(err):
            raise err
        self._failures += 1
        if self._failures >= self._client.policy.attempts(len(self._client.ring)):
            raise err
        self._client.ring.failed(self._index)
        await asyncio.sleep(self._client.policy.delay(self._failures, len(self._client.ring)))

    def cancel(self) -> None:
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()

    async def aclose(self) -> None:
        self.cancel()

    async def __aenter__(self) -> AsyncStream[T]:
        """Entering starts the watch: "from now" means from here, so changes made in the
        block before the first read are delivered too (the stream opens lazily)."""
        await self._pin()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class SessionOpener:
    """What `AsyncClient.session()` returns: await it for a session, or use it as an async
    context manager that closes the session on exit."""

    def __init__(self, client: AsyncClient, name: str, ttl: float, on_severed: Callback | None,
                 on_event: Callback | None, read_only_ok: bool | None) -> None:
        self._client = client
        self._args = (name, ttl, on_severed, on_event, read_only_ok)
        self._session: AsyncSession | None = None

    async def _open(self) -> AsyncSession:
        name, ttl, on_severed, on_event, read_only_ok = self._args
        info = await self._client.open_session(name, ttl, read_only_ok)
        return AsyncSession(self._client, info.session_id, info.ttl or ttl, name=name,
                            on_severed=on_severed, on_event=on_event)

    def __await__(self) -> Generator[Any, None, AsyncSession]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncSession:
        self._session = await self._open()
        return self._session

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._session is not None:
            await self._session.__aexit__(exc_type, exc, tb)


class AsyncSession:
    """A live session kept alive by an asyncio task (bidi keepalive stream) with another
    task reading its events; both reconnect to the next member and keep the session id.
    `fenced` (an asyncio.Event) is set and `on_severed(event)` called once the moment the
    session is known to be over. Create it inside a running loop."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: int,
        ttl: float,
        name: str = "",
        on_severed: Callback | None = None,
        on_event: Callback | None = None,
    ) -> None:
        self.client = client
        self.core = c.SessionCore(session_id, ttl, name)
        self.fenced = asyncio.Event()
        self._on_severed = on_severed
        self._on_event = on_event
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._stopping = False
        self._closed = False
        self._ka_call: Any = None
        self._ev_call: Any = None
        self._ev_index = -1
        self._callbacks: set[asyncio.Task[Any]] = set()
        client.add_mode_listener(self._client_moved)
        self._tasks = [
            asyncio.create_task(self._keepalive_loop(), name=f"coord-keepalive-{session_id}"),
            asyncio.create_task(self._events_loop(), name=f"coord-events-{session_id}"),
        ]

    @property
    def id(self) -> int:
        return self.core.session_id

    @property
    def ttl(self) -> float:
        return self.core.ttl

    @property
    def ended(self) -> SessionEvent | None:
        return self.core.ended

    @property
    def mode(self) -> str:
        return self.core.mode

    def remaining(self) -> float:
        return 0.0 if self.fenced.is_set() else self.core.remaining()

    async def own(self, group: str,
                  claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return await self.client.own(self, group, claims)

    async def release(self, group: str, resources: Iterable[str] | str) -> ReleaseResult:
        return await self.client.release(self, group, resources)

    async def put(self, key: Bytesish, value: Bytesish, *, prev_kv: bool = False) -> PutResult:
        return await self.client.put(key, value, session=self, prev_kv=prev_kv)

    async def events(self, timeout: float | None = None) -> AsyncIterator[SessionEvent]:
        """The session's events as they arrive; ends when the session ends (or after
        `timeout` seconds without one)."""
        while True:
            try:
                item = await asyncio.wait_for(self._events.get(), timeout)
            except TimeoutError:
                return
            if item is _END:
                self._events.put_nowait(_END)
                return
            yield item

    # -- background tasks ---------------------------------------------------------------
    async def _keepalive_loop(self) -> None:
        failures = 0
        ring = self.client.ring
        while not self._stopping:
            try:
                index, stubs = self.client.current()
            except CoordError:
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            call = stubs.Sessions.KeepAlive(metadata=self.client.metadata)
            self._ka_call = call
            try:
                while not self._stopping:
                    sent_at = time.monotonic()
                    await call.write(self.core.request())
                    try:
                        response = await asyncio.wait_for(call.read(), self.core.interval)
                    except TimeoutError:
                        call.cancel()
                        err: CoordError = error_for("STALLED", "keepalive unanswered",
                                                    grpc.StatusCode.DEADLINE_EXCEEDED)
                        break
                    if response is grpc.aio.EOF:
                        err = error_for("STREAM_ENDED", "keepalive stream ended",
                                        grpc.StatusCode.UNAVAILABLE)
                        break
                    ended = self.core.acked(sent_at, response)
                    if response.read_only:
                        self.client.saw_read_only()
                    if ended is not None:
                        self._end(ended, queue_it=True)
                        return
                    failures = 0
                    await asyncio.sleep(max(0.0, self.core.interval - (time.monotonic() - sent_at)))
                else:
                    return
            except asyncio.CancelledError:
                if self._stopping or not _call_cancelled():
                    raise
                err = error_for("CANCELLED", "keepalive cancelled", grpc.StatusCode.CANCELLED)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except asyncio.InvalidStateError:
                # write() on a call that already ended (the member went away while we
                # slept) raises this, not an RpcError: move on like any broken stream.
                err = error_for("STREAM_ENDED", "keepalive stream ended",
                                grpc.StatusCode.UNAVAILABLE)
            except grpc.aio.UsageError:  # the client closed its channels under us
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            if self._stopping:
                return
            if isinstance(err, SessionGoneError):
                self._end(self.core.gone(err.message), queue_it=True)
                return
            failures += 1
            ring.failed(index)
            if self._ev_call is not None and self._ev_index == index:
                self._ev_call.cancel()  # the member is stuck: move the event stream too
            await asyncio.sleep(self.client.policy.delay(failures, len(ring)))

    async def _events_loop(self) -> None:
        failures = 0
        ring = self.client.ring
        while not self._stopping:
            try:
                index, stubs = self.client.current()
            except CoordError:
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            call = stubs.Sessions.Events(
                c.pb.SessionEventsRequest(session_id=self.id), metadata=self.client.metadata
            )
            self._ev_call, self._ev_index = call, index
            try:
                while True:
                    pb_event = await call.read()
                    if pb_event is grpc.aio.EOF:
                        break
                    failures = 0
                    self._deliver(c.session_event(pb_event))
                    if self.core.ended is not None:
                        return
                if self._stopping:
                    return
                self._end(self.core.gone("the session's event stream ended"), queue_it=True)
                return
            except asyncio.CancelledError:
                if self._stopping or not _call_cancelled():
                    raise
                err: CoordError = error_for("CANCELLED", "event stream cancelled",
                                            grpc.StatusCode.CANCELLED)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except grpc.aio.UsageError:  # the client closed its channels under us
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            if self._stopping:
                return
            if isinstance(err, SessionGoneError):
                self._end(self.core.gone(err.message), queue_it=True)
                return
            failures += 1
            ring.failed(index)
            await asyncio.sleep(self.client.policy.delay(failures, len(ring)))

    def _client_moved(self, change: c.ModeChange) -> None:
        """The client found a read-write member: say so, and move the streams there."""
        event = self.core.moved(change)
        if event is not None:
            self._deliver(event)
        if change.moved:
            for call in (self._ka_call, self._ev_call):
                if call is not None:
                    call.cancel()  # each loop reconnects to the (new) current member

    def _deliver(self, event: SessionEvent) -> None:
        if event.type == "mode_changed" and event.mode != c.READ_WRITE:
            self.client.saw_read_only()
        terminal = self.core.observe(event)
        self._events.put_nowait(event)
        self._invoke(self._on_event, event)
        if terminal:
            self._end(event)

    def _end(self, event: SessionEvent, queue_it: bool = False) -> None:
        if not self.core.end(event):
            return
        self.fenced.set()
        self._stopping = True
        if queue_it:
            self._events.put_nowait(event)
        for call in (self._ka_call, self._ev_call):
            if call is not None:
                call.cancel()
        if self.core.report_loss:
            log.warning("coord: %s", c.describe_end(event))
            self._invoke(self._on_severed, event)
        self._events.put_nowait(_END)  # last: once events() ends, the callback has run

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

    # -- closing ------------------------------------------------------------------------
    async def close(self, timeout: float = 2.0) -> None:
        """End the session on the server and stop the tasks (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.core.closing = True
        self._stopping = True
        error: CoordError | None = None
        if self.core.ended is None:
            try:
                await self.client.close_session(self.id)
            except SessionGoneError:
                pass
            except CoordError as e:
                error = e
        self._end(c.SessionEvent("closed", self.id, message="closed by this client"),
                  queue_it=True)
        await self._stop_tasks(timeout)
        if error is not None:
            raise error

    async def detach(self, timeout: float = 2.0) -> None:
        """Stop keeping the session alive without closing it."""
        self._closed = True
        self.core.closing = True
        self._stopping = True
        for call in (self._ka_call, self._ev_call):
            if call is not None:
                call.cancel()
        await self._stop_tasks(timeout)

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
