"""The transport on gRPC's threaded stack, for the sync `Client`.

The sync Client runs the one client implementation, `AsyncClient`, on an event loop of
its own, but keeps its connections on gRPC's threaded stack rather than grpc.aio,
because grpc.aio is process-global in ways a library inside someone else's program
cannot afford:

- after `fork()`, a child that uses grpc.aio while its parent had grpc.aio running hangs,
  and steals the parent's wake-ups (both read grpc.aio's one poller socket), stalling
  the parent's calls too. The threaded stack works in a child, as the sync client always
  did.
- grpc.aio (1.85) keeps a reference to every event loop it ever served, so a program
  that opens and closes clients would keep every closed client's loop.

Unary calls complete through gRPC's own callbacks (no thread of ours). Each streaming
call has one reader thread that hands messages to the loop; it reads at most one
message ahead, so gRPC's flow control still slows a server down when the consumer is
slow, as iterating the call directly did.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf.message import Message

from coord.client.transport import (
    CHANNEL_OPTIONS,
    CallCancelled,
    CallEnded,
    Metadata,
    Stubs,
    TransportClosed,
)
from coord.tls.credentials import channel

__all__ = ["ThreadTransport", "connect"]

_EOF = object()
_CANCELLED = object()
_END_REQUESTS = object()


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """Hand `fn(*args)` to the loop from any thread; dropped if the loop is closed (the
    client is gone, and so is whoever would have read the result)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


def _settle(waiter: asyncio.Future[Any], future: grpc.Future) -> None:
    """Copy a finished gRPC future's outcome into the loop's future."""
    if waiter.done():  # the awaiting task was cancelled meanwhile
        return
    if future.cancelled():
        waiter.set_exception(CallCancelled())
        return
    error = future.exception()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(future.result())


def _set_ready(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _ReadCall:
    """A server-streaming call read by a thread of its own (see the module docstring).
    `read()` and `cancel()` run on the loop; the thread only reads and posts."""

    def __init__(self, transport: ThreadTransport, call: Any, name: str) -> None:
        self._loop = transport.loop
        self._transport = transport
        self._call = call
        self._items: asyncio.Queue[Any] = asyncio.Queue()
        self._credit = threading.Semaphore(1)  # messages the thread may read ahead
        self._cancelled = False
        self._final: Any = None  # _EOF or the error that ended the call
        transport.track(self)
        threading.Thread(target=self._pump, name=name, daemon=True).start()

    def _pump(self) -> None:
        try:
            while True:
                self._credit.acquire()
                if self._cancelled:
                    return
                item: Any
                try:
                    item = next(self._call)
                except StopIteration:
                    item = _EOF
                except Exception as e:  # an RpcError, or whatever gRPC raised: read() raises it
                    item = e
                _call_soon(self._loop, self._items.put_nowait, item)
                if item is _EOF or isinstance(item, Exception):
                    return
        finally:
            self._ended()
            self._transport.forget(self)

    def _ended(self) -> None:
        """The reader thread is done (a hook for the bidi call)."""

    async def read(self) -> Any | None:
        if self._cancelled:
            raise CallCancelled
        if self._final is None:
            item = await self._items.get()
            if self._cancelled or item is _CANCELLED:
                raise CallCancelled
            if item is not _EOF and not isinstance(item, Exception):
                self._credit.release()
                return item
            self._final = item
        if self._final is _EOF:
            return None
        raise self._final

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._call.cancel()
        self._credit.release()  # a thread waiting to read ahead sees the cancel and ends
        self._items.put_nowait(_CANCELLED)


class _BidiCall(_ReadCall):
    """A bidirectional call: requests go through a queue that gRPC's sending thread
    drains; the queue ends when the call does, so that thread ends too."""

    def __init__(self, transport: ThreadTransport, multicallable: Any, metadata: Metadata,
                 name: str) -> None:
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        super().__init__(transport, multicallable(self._request_iterator(), metadata=metadata),
                         name)

    def _request_iterator(self) -> Iterator[Message]:
        while (request := self._requests.get()) is not _END_REQUESTS:
            yield request

    async def write(self, request: Message) -> None:
        if self._cancelled:
            raise CallCancelled
        if self._final is not None or self._call.done():
            raise CallEnded
        self._requests.put(request)

    async def started(self) -> None:
        """Writes only queue (gRPC's sending thread drains them), so they never race the
        call's start: nothing to wait for."""

    def _ended(self) -> None:
        self._requests.put(_END_REQUESTS)

    def cancel(self) -> None:
        super().cancel()
        self._requests.put(_END_REQUESTS)


class ThreadTransport:
    """One threaded gRPC channel (TLS with `credentials`), driven from the client's event
    loop."""

    def __init__(self, endpoint: str, credentials: grpc.ChannelCredentials | None = None
                 ) -> None:
        self.loop = asyncio.get_running_loop()
        self.channel = channel(endpoint, credentials, CHANNEL_OPTIONS)
        self.stubs = Stubs(self.channel)
        self._calls: set[_ReadCall] = set()
        self._lock = threading.Lock()  # _calls: the reader threads forget themselves
        self._closed = False

    def track(self, call: _ReadCall) -> None:
        with self._lock:
            self._calls.add(call)

    def forget(self, call: _ReadCall) -> None:
        with self._lock:
            self._calls.discard(call)

    async def unary(self, service: str, method: str, request: Message, *, timeout: float,
                    metadata: Metadata) -> Any:
        multicallable = self.stubs.method(service, method)
        try:
            future = multicallable.future(request, timeout=timeout, metadata=metadata)
        except ValueError:  # gRPC refuses calls on a closed channel
            if self._closed:
                raise TransportClosed from None
            raise
        waiter: asyncio.Future[Any] = self.loop.create_future()
        future.add_done_callback(lambda f: _call_soon(self.loop, _settle, waiter, f))
        try:
            return await waiter
        except asyncio.CancelledError:
            future.cancel()
            raise
        except (grpc.RpcError, CallCancelled):
            if self._closed:  # closing the channel cancelled the call
                raise TransportClosed from None
            raise

    def server_stream(self, service: str, method: str, request: Message, *,
                      metadata: Metadata) -> _ReadCall:
        multicallable = self.stubs.method(service, method)
        try:
            call = multicallable(request, metadata=metadata)
        except ValueError:
            if self._closed:
                raise TransportClosed from None
            raise
        return _ReadCall(self, call, f"coord-{method.lower()}")

    def bidi_stream(self, service: str, method: str, *, metadata: Metadata) -> _BidiCall:
        try:
            return _BidiCall(self, self.stubs.method(service, method), metadata,
                             f"coord-{method.lower()}")
        except ValueError:
            if self._closed:
                raise TransportClosed from None
            raise

    async def wait_ready(self, timeout: float) -> bool:
        ready = grpc.channel_ready_future(self.channel)
        waiter: asyncio.Future[None] = self.loop.create_future()
        ready.add_done_callback(lambda _: _call_soon(self.loop, _set_ready, waiter))
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            return False
        finally:
            ready.cancel()
        return True

    async def close(self) -> None:
        self._closed = True
        with self._lock:
            calls = list(self._calls)
        for call in calls:
            call.cancel()
        self.channel.close()


def connect(endpoint: str, credentials: grpc.ChannelCredentials | None = None
            ) -> ThreadTransport:
    """The `Connect` the sync Client gives its AsyncClient (called on its loop)."""
    return ThreadTransport(endpoint, credentials)
