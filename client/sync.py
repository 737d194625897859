"""The synchronous client.

One gRPC channel per endpoint, used while that endpoint is current; on UNAVAILABLE (a
member down, refusing, without quorum) the client moves to the next endpoint and tries
again, a bounded number of times. Only requests that are safe to repeat are repeated:
reads, and writes that carry a request_id (every write that supports one gets a fresh
uuid4, so a retry after a lost reply is applied once), or any request when the error
proves it was not applied. Request building, conversion and the retry policy are shared
with the asyncio client (`_common`).
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import grpc

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

_END = object()


class Client:
    """A client of a coord cluster. Thread-safe; use as a context manager or `close()`.

    `timeout` bounds each try (the whole operation, failover included, is bounded by
    `policy.budget_factor` times it).

    `read_only_ok` (ZooKeeper's read-only client): when the member it talks to loses
    quorum, reads keep being answered from that member, marked `header.read_only`; writes
    raise ReadOnlyError at once; and a background prober looks for a read-write member
    (pauses doubling from 0.1 s to 2 s) and moves the client there, telling sessions and
    `add_mode_listener` listeners. A normal client fails over to a majority member, or
    raises NoQuorumError when no member with a quorum is reachable.
    """

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
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, c.Stubs] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.metadata = c.READ_ONLY_OK_METADATA if read_only_ok else ()
        self.mode_listeners: list[Callable[[c.ModeChange], Any]] = []
        self._prober = _Prober(self)

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self.ring.endpoints

    def add_mode_listener(self, listener: Callable[[c.ModeChange], Any]) -> None:
        """Called (from the prober's thread) when the client finds a read-write member."""
        self.mode_listeners.append(listener)

    def saw_read_only(self) -> None:
        """A member answered read-only: look for a read-write one in the background."""
        if self.read_only_ok:
            self._prober.kick()

    # -- plumbing -----------------------------------------------------------------------
    def _channel(self, endpoint: str) -> tuple[grpc.Channel, c.Stubs]:
        with self._lock:
            if self._closed:
                raise error_for("CLOSED", "the client is closed", grpc.StatusCode.CANCELLED)
            ch = self._channels.get(endpoint)
            if ch is None:
                ch = grpc.insecure_channel(endpoint, options=c.CHANNEL_OPTIONS)
                self._channels[endpoint] = ch
                self._stubs[endpoint] = c.Stubs(ch)
            return ch, self._stubs[endpoint]

    def current(self) -> tuple[int, c.Stubs]:
        """(ring index, stubs) of the current endpoint."""
        index, endpoint = self.ring.current()
        return index, self._channel(endpoint)[1]

    def _run(self, call: c.Call[T]) -> T:
        attempts = c.Attempts(self.policy, len(self.ring), self.timeout)
        while True:
            index, endpoint = self.ring.current()
            channel, stubs = self._channel(endpoint)
            try:
                if not call.safe:
                    self._ensure_ready(channel, attempts.call_timeout())
                response = stubs.method(call.service, call.method)(
                    call.request, timeout=attempts.call_timeout(), metadata=self.metadata
                )
                if c.served_read_only(response):
                    self.saw_read_only()
                return c.finish(call, response, self.read_only_ok)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except CoordError as e:
                err = e
            except ValueError:  # grpc refuses calls on a channel closed under us
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
            time.sleep(delay)

    @staticmethod
    def _ensure_ready(channel: grpc.Channel, timeout: float) -> None:
        """Before sending a request that must not be repeated blindly: a channel that
        never connected proves the request was not sent."""
        try:
            grpc.channel_ready_future(channel).result(timeout=min(timeout, 1.0))
        except grpc.FutureTimeoutError:
            raise error_for("NOT_CONNECTED", "could not connect") from None

    # -- KV -----------------------------------------------------------------------------
    def put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
            prev_kv: bool = False) -> PutResult:
        """Set `key`; bound to `session` if given (deleted when the session ends)."""
        return self._run(c.put_call(key, value, session=session, prev_kv=prev_kv))

    def get(self, key: Bytesish, *, revision: int = 0,
            serializable: bool = False) -> KeyValue | None:
        """One key, or None if it does not exist."""
        return self._run(c.get_call(key, revision=revision, serializable=serializable))

    def range(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, limit: int = 0, revision: int = 0,
              serializable: bool = False) -> RangeResult:
        """Keys in [key, range_end) (range_end "\\0": every key >= key) or under `prefix`."""
        return self._run(c.range_call(key, range_end, prefix=prefix, limit=limit,
                                      revision=revision, serializable=serializable))

    def delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
               prefix: Bytesish | None = None, prev_kv: bool = False) -> DeleteResult:
        return self._run(c.delete_call(key, range_end, prefix=prefix, prev_kv=prev_kv))

    def txn(self) -> Txn:
        """`client.txn().if_version(k, "=", 0).then_put(k, v).else_get(k).commit()`"""
        return Txn(self)

    def put_if_absent(self, key: Bytesish, value: Bytesish, *,
                      session: SessionRef | None = None) -> CasResult:
        return self._run(c.put_if_absent_call(key, value, session=session))

    def compare_and_set(self, key: Bytesish, expected_version: int, value: Bytesish, *,
                        session: SessionRef | None = None) -> CasResult:
        """Write iff `key` is at `expected_version` (0: it must not exist)."""
        return self._run(c.compare_and_set_call(key, expected_version, value, session=session))

    def compact(self, revision: int) -> Header:
        return self._run(c.compact_call(revision))

    def watch(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, from_revision: int = 0,
              prev_kv: bool = False) -> Stream[WatchEvent]:
        """Changes to a key, range or prefix from `from_revision` (0: from now on). The
        stream survives member failures (it resumes where it was on another member);
        CompactedError if the history it needs was compacted."""
        k, end = c.key_range(key, range_end, prefix)
        return Stream(self, c.WatchCursor(k, end, from_revision, prev_kv))

    # -- producer ids -------------------------------------------------------------------
    def allocate_pid_block(self, requester: str = "", size: int = 1000) -> PidBlock:
        return self._run(c.allocate_pid_block_call(requester, size))

    def lease_pid(self, topic: str, partition: int, pid: int = -1) -> PidLease:
        """A new leased pid (pid -1) or the live lease of `pid`."""
        return self._run(c.lease_pid_call(topic, partition, pid))

    def init_producer(self, producer_key: str) -> Producer:
        """(pid, generation) for `producer_key`; fences every older instance."""
        return self._run(c.init_producer_call(producer_key))

    def check_producer(self, producer_key: str, pid: int, generation: int) -> Header:
        """ProducerFencedError if a newer instance of the producer exists."""
        return self._run(c.check_producer_call(producer_key, pid, generation))

    # -- ownership ----------------------------------------------------------------------
    def own(self, session: SessionRef, group: str,
            claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        """Claim resources for `session`, all or nothing. A bare resource name claims at
        generation 0 (take it, severing any owner); (resource, generation) claims only if
        the current owner's generation is not higher (else OwnedByHigherGenerationError)."""
        return self._run(c.own_call(session, group, claims))

    def release(self, session: SessionRef, group: str,
                resources: Iterable[str] | str) -> ReleaseResult:
        return self._run(c.release_call(session, group, resources))

    def get_owner(self, group: str, resource: str, *, serializable: bool = False) -> c.Owner:
        """The owner (session_id 0: free)."""
        return self._run(c.get_owner_call(group, resource, serializable))

    def list_owners(self, group: str, prefix: str = "", *,
                    serializable: bool = False) -> tuple[c.Owner, ...]:
        return self._run(c.list_owners_call(group, prefix, serializable))

    def watch_owners(self, group: str, prefix: str = "", *,
                     from_revision: int = 0) -> Stream[OwnerChange]:
        """Current owners (snapshot=True) then changes; with `from_revision`, every change
        since that revision (frees included) then live ones, or CompactedError if that
        history is gone. Survives member failures without gaps or repeats."""
        return Stream(self, c.OwnersCursor(group, prefix, from_revision))

    # -- sessions -----------------------------------------------------------------------
    def open_session(self, name: str = "", ttl: float = 10.0,
                     read_only_ok: bool | None = None) -> SessionInfo:
        """Open a session WITHOUT keeping it alive (see `session()` for that)."""
        ok = self.read_only_ok if read_only_ok is None else read_only_ok
        return self._run(c.open_session_call(name, ttl, ok))

    def close_session(self, session: SessionRef) -> Header:
        """End a session now (its ownership and bound keys are released at once)."""
        return self._run(c.close_session_call(session))

    def session(
        self,
        name: str = "",
        ttl: float = 10.0,
        on_severed: Callable[[SessionEvent], Any] | None = None,
        on_event: Callable[[SessionEvent], Any] | None = None,
        read_only_ok: bool | None = None,
    ) -> Session:
        """Open a session and keep it alive in the background until `close()`."""
        info = self.open_session(name, ttl, read_only_ok)
        return Session(self, info.session_id, info.ttl or ttl, name=name,
                       on_severed=on_severed, on_event=on_event)

    def attach(
        self,
        session_id: int,
        ttl: float = 10.0,
        on_severed: Callable[[SessionEvent], Any] | None = None,
        on_event: Callable[[SessionEvent], Any] | None = None,
    ) -> Session:
        """Keep an existing session alive (e.g. one opened by another process): a session
        outlives its connections. `ttl` paces keepalives until the server states it."""
        return Session(self, session_id, ttl, on_severed=on_severed, on_event=on_event)

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        self._prober.stop()
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for ch in channels:
            ch.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Txn(c.TxnBuilder):
    """A transaction being built; `commit()` sends it (retried with one request_id)."""

    def __init__(self, client: Client) -> None:
        super().__init__()
        self._client = client

    def commit(self) -> TxnResult:
        return self._client._run(c.txn_call(self.build()))


class Stream(Generic[T]):
    """An iterator over a server stream that reopens itself on the next member after a
    failure, resuming from its cursor. Consecutive failures are bounded by the retry
    policy; `cancel()` (from any thread) ends the iteration."""

    def __init__(self, client: Client, cursor: c.Cursor[T]) -> None:
        self._client = client
        self._cursor = cursor
        self._call: Any = None
        self._index = 0
        self._pending: collections.deque[T] = collections.deque()
        self._failures = 0
        self._cancelled = threading.Event()
        self._lock = threading.Lock()

    def __iter__(self) -> Stream[T]:
        return self

    def __next__(self) -> T:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._cancelled.is_set():
                raise StopIteration
            try:
                if self._call is None:
                    self._open()
                response = next(self._call)
            except StopIteration:
                # The server ended the stream without a reason: reopen elsewhere.
                self._call = None
                self._failed(error_for("STREAM_ENDED", "the server ended the stream",
                                       grpc.StatusCode.UNAVAILABLE))
                continue
            except grpc.RpcError as e:
                self._call = None
                if self._cancelled.is_set():
                    raise StopIteration from None
                self._failed(from_rpc_error(e))
                continue
            except CoordError as err:  # the start read failed (it retried already)
                self._call = None
                if self._cancelled.is_set():
                    raise StopIteration from None
                raise err
            except KeyboardInterrupt:
                self.cancel()
                raise
            self._failures = 0
            if c.served_read_only(response):
                self._client.saw_read_only()
            try:
                self._pending.extend(self._cursor.feed(response))
            except CoordError:
                self.cancel()
                raise

    def _pin(self) -> None:
        """Resolve where the stream starts (a watch "from now": the current revision + 1)."""
        start = self._cursor.start_call()
        if start is not None:
            self._cursor.started(self._client._run(start))

    def _open(self) -> None:
        self._pin()
        self._index, stubs = self._client.current()
        call = stubs.method(self._cursor.service, self._cursor.method)(
            self._cursor.request(), metadata=self._client.metadata
        )
        with self._lock:
            self._call = call
            if self._cancelled.is_set():
                call.cancel()

    def _failed(self, err: CoordError) -> None:
        if not self._cursor.on_error(err):
            raise err
        self._failures += 1
        if self._failures >= self._client.policy.attempts(len(self._client.ring)):
            raise err
        log.debug("stream %s.%s failed (%s); reopening on the next member",
                  self._cursor.service, self._cursor.method, err.reason)
        self._client.ring.failed(self._index)
        self._cancelled.wait(self._client.policy.delay(self._failures, len(self._client.ring)))

    def cancel(self) -> None:
        """Stop the stream; a blocked `next()` returns StopIteration."""
        with self._lock:
            self._cancelled.set()
            if self._call is not None:
                self._call.cancel()

    close = cancel

    def __enter__(self) -> Stream[T]:
        """Entering starts the watch: "from now" means from here, so changes made in the
        block before the first read are delivered too (the stream opens lazily)."""
        self._pin()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Session:
    """A live session: keepalives every ttl/3 on a bidi stream in a daemon thread, and the
    session's events read by another. Both reconnect to the next member on failure and
    keep the same session id: the session outlives its connections.

    The moment the session is known to be over (a severed/expired/closed event, keepalive
    answering gone, the server not knowing the id) `fenced` is set and `on_severed(event)`
    is called once, so an owner stops writing at once. `close()` ends it on the server
    (instant release) and stops the threads."""

    def __init__(
        self,
        client: Client,
        session_id: int,
        ttl: float,
        name: str = "",
        on_severed: Callable[[SessionEvent], Any] | None = None,
        on_event: Callable[[SessionEvent], Any] | None = None,
    ) -> None:
        self.client = client
        self.core = c.SessionCore(session_id, ttl, name)
        self.fenced = threading.Event()
        self._on_severed = on_severed
        self._on_event = on_event
        self._events: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ka_call: Any = None
        self._ev_call: Any = None
        self._ev_index = -1
        self._closed = False
        client.add_mode_listener(self._client_moved)
        self._threads = [
            threading.Thread(target=self._keepalive_loop, daemon=True,
                             name=f"coord-keepalive-{session_id}"),
            threading.Thread(target=self._events_loop, daemon=True,
                             name=f"coord-events-{session_id}"),
        ]
        for t in self._threads:
            t.start()

    @property
    def id(self) -> int:
        return self.core.session_id

    @property
    def ttl(self) -> float:
        return self.core.ttl

    @property
    def ended(self) -> SessionEvent | None:
        """How the session ended, or None while it is live."""
        return self.core.ended

    @property
    def mode(self) -> str:
        """read-write, or read-only while the cluster has no quorum (mode_changed)."""
        return self.core.mode

    def remaining(self) -> float:
        """Seconds the session is known to stay alive even if no keepalive gets through."""
        return 0.0 if self.fenced.is_set() else self.core.remaining()

    # -- conveniences bound to this session ---------------------------------------------
    def own(self, group: str, claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return self.client.own(self, group, claims)

    def release(self, group: str, resources: Iterable[str] | str) -> ReleaseResult:
        return self.client.release(self, group, resources)

    def put(self, key: Bytesish, value: Bytesish, *, prev_kv: bool = False) -> PutResult:
        """A key deleted when this session ends."""
        return self.client.put(key, value, session=self, prev_kv=prev_kv)

    def events(self, timeout: float | None = None) -> Iterator[SessionEvent]:
        """The session's events as they arrive; ends when the session ends (or after
        `timeout` seconds without one)."""
        while True:
            try:
                item = self._events.get(timeout=timeout)
            except queue.Empty:
                return
            if item is _END:
                self._events.put(_END)  # so every other reader ends too
                return
            yield item

    # -- background threads -------------------------------------------------------------
    def _keepalive_loop(self) -> None:
        failures = 0
        ring = self.client.ring
        while not self._stop.is_set():
            try:
                index, stubs = self.client.current()
            except CoordError:
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            sent: collections.deque[float] = collections.deque()
            holder: list[Any] = []
            try:
                call = stubs.Sessions.KeepAlive(
                    self._keepalive_requests(sent, holder), metadata=self.client.metadata
                )
                holder.append(call)
                with self._lock:
                    self._ka_call = call
                if self._stop.is_set():
                    call.cancel()
                for response in call:
                    ended = self.core.acked(sent.popleft() if sent else time.monotonic(),
                                            response)
                    if response.read_only:
                        self.client.saw_read_only()
                    if ended is not None:
                        self._end(ended, queue_it=True)
                        return
                    failures = 0
                err: CoordError = error_for("STREAM_ENDED", "keepalive stream ended",
                                            grpc.StatusCode.UNAVAILABLE)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except ValueError:  # the client closed its channels under us
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            if self._stop.is_set():
                return
            if isinstance(err, SessionGoneError):
                self._end(self.core.gone(err.message), queue_it=True)
                return
            # Keep trying for as long as it takes: a new leader restarts every session's
            # clock, so the session can survive even a whole-cluster outage.
            failures += 1
            log.debug("session %d keepalive on %s failed (%s); reconnecting",
                      self.id, ring.endpoints[index], err.reason)
            ring.failed(index)
            self._kick_events(index)
            self._stop.wait(self.client.policy.delay(failures, len(ring)))

    def _keepalive_requests(self, sent: collections.deque[float],
                            holder: list[Any]) -> Iterator[Any]:
        """One KeepAliveRequest per interval (gRPC consumes this in its own thread). A
        keepalive unanswered for a whole interval cancels the call: the member is stuck
        (e.g. paused), and the loop reconnects elsewhere."""
        while not self._stop.is_set():
            if self.core.stalled(sent[0] if sent else None):
                if holder:
                    holder[0].cancel()
                return
            sent.append(time.monotonic())
            yield self.core.request()
            self._stop.wait(self.core.interval)

    def _kick_events(self, index: int) -> None:
        """The keepalive found member `index` stuck: move the event stream off it too."""
        with self._lock:
            if self._ev_call is not None and self._ev_index == index:
                self._ev_call.cancel()

    def _events_loop(self) -> None:
        failures = 0
        ring = self.client.ring
        while not self._stop.is_set():
            try:
                index, stubs = self.client.current()
            except CoordError:
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            try:
                call = stubs.Sessions.Events(
                    c.pb.SessionEventsRequest(session_id=self.id), metadata=self.client.metadata
                )
                with self._lock:
                    self._ev_call, self._ev_index = call, index
                if self._stop.is_set():
                    call.cancel()
                for pb_event in call:
                    failures = 0
                    event = c.session_event(pb_event)
                    self._deliver(event)
                    if self.core.ended is not None:
                        return
                if self._stop.is_set():
                    return
                # The stream ends when the session ends.
                self._end(self.core.gone("the session's event stream ended"), queue_it=True)
                return
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except ValueError:
                self._end(self.core.gone("the client was closed"), queue_it=True)
                return
            if self._stop.is_set():
                return
            if isinstance(err, SessionGoneError):
                self._end(self.core.gone(err.message), queue_it=True)
                return
            failures += 1
            ring.failed(index)
            self._stop.wait(self.client.policy.delay(failures, len(ring)))

    def _client_moved(self, change: c.ModeChange) -> None:
        """The prober found a read-write member: say so, and move the streams there."""
        event = self.core.moved(change)
        if event is not None:
            self._deliver(event)
        if not change.moved:
            return
        with self._lock:
            calls = [self._ka_call, self._ev_call]
        for call in calls:
            if call is not None:
                call.cancel()  # each loop reconnects to the (new) current member

    def _deliver(self, event: SessionEvent) -> None:
        if event.type == "mode_changed" and event.mode != c.READ_WRITE:
            self.client.saw_read_only()
        terminal = self.core.observe(event)
        self._events.put(event)
        _invoke(self._on_event, event)
        if terminal:
            self._end(event)

    def _end(self, event: SessionEvent, queue_it: bool = False) -> None:
        """The session is over: fence, stop, tell. `queue_it` for ends the client made up
        (server events are queued on arrival)."""
        if not self.core.end(event):
            return
        self.fenced.set()  # first: whatever a callback does, the owner is fenced
        self._stop.set()
        if queue_it:
            self._events.put(event)
        with self._lock:
            calls = [self._ka_call, self._ev_call]
        for call in calls:
            if call is not None:
                call.cancel()
        if self.core.report_loss:
            log.warning("coord: %s", c.describe_end(event))
            _invoke(self._on_severed, event)
        self._events.put(_END)  # last: once events() ends, the callback has run

    # -- closing ------------------------------------------------------------------------
    def close(self, timeout: float = 2.0) -> None:
        """End the session on the server (everything it holds is released at once) and
        stop the threads. Idempotent; a session already gone closes quietly."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.core.closing = True
        self._stop.set()
        error: CoordError | None = None
        if self.core.ended is None:
            try:
                self.client.close_session(self.id)
            except SessionGoneError:
                pass
            except CoordError as e:
                error = e  # it expires after its TTL anyway; report after cleaning up
        self._end(c.SessionEvent("closed", self.id, message="closed by this client"),
                  queue_it=True)
        self._join(timeout)
        if error is not None:
            raise error

    def detach(self, timeout: float = 2.0) -> None:
        """Stop keeping the session alive WITHOUT closing it (it expires after its TTL
        unless someone else keeps it alive)."""
        with self._lock:
            self._closed = True
        self.core.closing = True
        self._stop.set()
        with self._lock:
            calls = [self._ka_call, self._ev_call]
        for call in calls:
            if call is not None:
                call.cancel()
        self._join(timeout)

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.close()
        except CoordError:
            if exc_type is None:
                raise
            log.warning("coord: closing session %d failed", self.id, exc_info=True)


def _invoke(callback: Callable[[SessionEvent], Any] | None, event: SessionEvent) -> None:
    if callback is None:
        return
    try:
        callback(event)
    except Exception:
        log.exception("coord: session callback failed")


class _Prober:
    """Background search for a read-write member while the client is served read-only.
    One thread at a time; it ends when the current member is read-write again or the
    client closes."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def kick(self) -> None:
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, daemon=True, name="coord-probe")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        round_ = 0
        while not self._stop.wait(c.probe_pause(round_)):
            round_ += 1
            found = self._probe()
            if found is None:
                continue
            index, member = found
            c.move_to_read_write(self._client.ring, self._client.mode_listeners, index, member)
            return

    def _probe(self) -> tuple[int, str] | None:
        """(ring index, member name) of a read-write member, current one first."""
        client = self._client
        for index in c.probe_order(client.ring):
            try:
                stubs = client._channel(client.ring.endpoints[index])[1]
                status = stubs.Admin.Status(c.STATUS_REQUEST, timeout=c.PROBE_TIMEOUT)
            except (grpc.RpcError, CoordError, ValueError):
                continue
            if c.is_read_write(status):
                return index, status.name
        return None
