"""`Client`'s streams (`coord.client.sync`): a blocking facade over `AsyncStream`."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from coord.client.aio_stream import AsyncStream
from coord.client.cursors import Cursor
from coord.client.loop_thread import LoopClosed
from coord.client.transport import closed_error

if TYPE_CHECKING:
    from coord.client.sync import Client

__all__ = ["Stream"]

T = TypeVar("T")


async def _next_item(stream: AsyncStream[T]) -> tuple[bool, T | None]:
    """(True, item), or (False, None) once the stream ended."""
    try:
        return True, await stream.__anext__()
    except StopAsyncIteration:
        return False, None


class Stream(Generic[T]):
    """A blocking iterator over a server stream that reopens itself on the next member
    after a failure, resuming from its cursor (an `AsyncStream` on the client's loop).
    Consecutive failures are bounded by the retry policy; `cancel()` (from any thread)
    ends the iteration, a blocked `next()` included."""

    def __init__(self, client: Client, cursor: Cursor[T]) -> None:
        self._client = client
        self._owner = client._aio
        self._aio = AsyncStream(client._aio, cursor)
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._waiting: concurrent.futures.Future[tuple[bool, T | None]] | None = None

    def __iter__(self) -> Stream[T]:
        return self

    def __next__(self) -> T:
        if self._cancelled.is_set():
            raise StopIteration
        coro = _next_item(self._aio)
        self._client._check_owner(self._owner, coro)
        try:
            future = self._client._loop.submit(coro)
        except LoopClosed:
            raise closed_error() from None
        with self._lock:
            self._waiting = future
            if self._cancelled.is_set():
                future.cancel()
        try:
            found, item = future.result()
        except concurrent.futures.CancelledError:
            if self._cancelled.is_set():
                raise StopIteration from None
            raise closed_error() from None  # the client was closed under us
        except KeyboardInterrupt:
            self.cancel()
            raise
        finally:
            with self._lock:
                self._waiting = None
        if not found:
            raise StopIteration
        return item  # type: ignore[return-value]

    def cancel(self) -> None:
        """Stop the stream; a blocked `next()` returns StopIteration."""
        self._cancelled.set()
        self._client._loop.call_soon(self._aio.cancel)
        with self._lock:
            future = self._waiting
        if future is not None:
            future.cancel()

    close = cancel

    def __enter__(self) -> Stream[T]:
        """Entering starts the watch: "from now" means from here, so changes made in the
        block before the first read are delivered too (the stream opens lazily)."""
        self._client._wait_for(self._owner, self._aio.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
