"""The calling side of a pipelined stream: requests tagged with ids of ours, the calls
waiting for their answers, and the requests waiting to be sent — everything made in one
loop turn leaves in one message. The client library's `Pipeline` (client/aio_pipeline)
and a follower's forwarding stream to the leader (server/forward/link) both call
through it; each opens its stream, writes and reads it and says what its end means,
this module only the bookkeeping, with no gRPC and nothing of the server or the client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["MAX_BATCH", "TaggedCalls"]

MAX_BATCH = 10_000
"""The most requests one message carries, and the most one stream has in flight at its
serving end (`server/transport/tagged_stream`): the server refuses a longer message and
reads no further message while that many are in flight, so what a stream makes it hold is
bounded; this side cuts what it sends to fit."""

M = TypeVar("M")  # one request as it goes in a message


class TaggedCalls(Generic[M]):
    """Calls in flight by tag; `call` sends one and waits for `settle` or `fail_all`.
    `stream` is the open stream they go on (None until `opened`, and again once `ended`)."""

    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.outbox: list[M] = []
        self.wake = asyncio.Event()
        self.stream: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._next_tag = 0

    def opened(self, stream: Any, *tasks: Coroutine[Any, Any, None]) -> None:
        """`stream` is open: `tasks` (its writer and its reader) run until it ends."""
        self.stream = stream
        self._tasks = [asyncio.ensure_future(task) for task in tasks]

    def ended(self, stream: Any, error: Callable[[], BaseException]) -> None:
        """`stream` failed: cancel it and its tasks (but the one calling this), and fail
        every call in flight with `error()`. Ignored for a stream no longer open."""
        if self.stream is not stream:
            return
        self.stream = None
        stream.cancel()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks = []
        self.fail_all(error)

    async def call(self, make: Callable[[int], M], timeout: float,
                   expired: Callable[[float], BaseException],
                   abandon: Callable[[int], None] | None = None) -> Any:
        """Queue the request `make(tag)` and return its answer; raise `expired(timeout)`
        if none came in time. `abandon(tag)` is told of a call given up (timed out or
        its task cancelled), e.g. to cancel it at the far end."""
        self._next_tag += 1
        tag = self._next_tag
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self.pending[tag] = fut
        self.outbox.append(make(tag))
        self.wake.set()
        timer = loop.call_later(timeout, self._expire, tag, timeout, expired, abandon)
        try:
            return await fut
        except asyncio.CancelledError:
            if self.pending.pop(tag, None) is not None and abandon is not None:
                abandon(tag)
            raise
        finally:
            timer.cancel()
            self.pending.pop(tag, None)

    def _expire(self, tag: int, timeout: float, expired: Callable[[float], BaseException],
                abandon: Callable[[int], None] | None) -> None:
        fut = self.pending.pop(tag, None)
        if fut is None or fut.done():
            return
        if abandon is not None:
            abandon(tag)
        fut.set_exception(expired(timeout))

    def settle(self, tag: int, result: Any = None, error: BaseException | None = None) -> None:
        """The answer to `tag` (ignored if the call was given up meanwhile)."""
        fut = self.pending.pop(tag, None)
        if fut is None or fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def fail_all(self, error: Callable[[], BaseException]) -> None:
        """The stream failed: every call in flight raises `error()`; unsent requests go."""
        self.outbox = []
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error())

    async def send_loop(self, write: Callable[[list[M]], Awaitable[None]]) -> None:
        """Forever: wait for requests, write everything queued, MAX_BATCH to a message."""
        wake = self.wake
        while True:
            await wake.wait()
            wake.clear()
            while self.outbox:
                batch, self.outbox = self.outbox, []
                if len(batch) > MAX_BATCH:
                    batch, self.outbox = batch[:MAX_BATCH], batch[MAX_BATCH:]
                await write(batch)
