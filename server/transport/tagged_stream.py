"""The serving side of a pipelined stream: requests tagged with the caller's ids, each
served by a task of its own, answers sent as they complete, those that complete together
in one message. The client API's stream (`server/api/pipeline.py`) and the followers'
forwarding stream to the leader (`server/forward/service.py`) both run on it; the
calling side is `coord.tagged_calls`.

Every request of one message is started in the same loop turn, so what they submit to
the Raft node (proposals, ReadIndex waits) reaches it together: the node proposes
everything that arrived in one turn of its loop as one batch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, Generic, TypeVar

from coord.tagged_calls import MAX_BATCH

log = logging.getLogger(__name__)

Q = TypeVar("Q")  # a request message (a batch)
R = TypeVar("R")  # one answer


class TaggedStream(Generic[R]):
    """One stream's requests in flight, by tag, and the answers waiting to be sent.

    `send` writes one message of answers; `failed(tag, exc)` is the answer to a request
    whose handler raised unexpectedly (a bug must cost one answer, not the stream).
    With `max_in_flight` requests in flight, the next message is read only once one of
    them is answered: the caller's further requests wait in gRPC's flow control, not in
    this member's memory."""

    def __init__(self, send: Callable[[list[R]], Awaitable[None]],
                 failed: Callable[[int, BaseException], R],
                 max_in_flight: int = MAX_BATCH) -> None:
        self._send = send
        self._failed = failed
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self.max_in_flight = max_in_flight
        self._outbox: list[R] = []
        self._ready = asyncio.Event()
        self._room = asyncio.Event()  # set while fewer than max_in_flight are in flight
        self._room.set()
        self._reading = True

    def start(self, tag: int, answer: Coroutine[Any, Any, R | None]) -> None:
        """Serve a request (the caller checks first that `tag` is not in flight)."""
        self.in_flight[tag] = asyncio.ensure_future(self._serve(tag, answer))
        if len(self.in_flight) >= self.max_in_flight:
            self._room.clear()

    def cancel(self, tag: int) -> None:
        """Stop serving `tag` (no answer follows for it)."""
        task = self.in_flight.pop(tag, None)
        if task is not None:
            task.cancel()
            if len(self.in_flight) < self.max_in_flight:
                self._room.set()

    def answer(self, result: R) -> None:
        self._outbox.append(result)
        self._ready.set()

    async def _serve(self, tag: int, answer: Coroutine[Any, Any, R | None]) -> None:
        try:
            result = await answer
        except asyncio.CancelledError:
            return  # cancelled by the caller, or the stream ended: nobody to answer
        except Exception as e:
            log.exception("a pipelined request failed")
            result = self._failed(tag, e)
        finally:
            if self.in_flight.get(tag) is asyncio.current_task():
                del self.in_flight[tag]
                if len(self.in_flight) < self.max_in_flight:
                    self._room.set()
        if result is not None:
            self.answer(result)

    async def run(self, requests: AsyncIterator[Q],
                  take: Callable[[Q], Iterable[None] | None]) -> None:
        """Read `requests` (each handed to `take`, which starts or cancels its parts)
        and send answers until the caller ended its side and nothing is in flight."""
        reader = asyncio.ensure_future(self._read(requests, take))
        try:
            while self._reading or self.in_flight or self._outbox:
                await self._ready.wait()
                self._ready.clear()
                if self._outbox:
                    batch, self._outbox = self._outbox, []
                    await self._send(batch)
            await reader  # re-raises what ended the reading, if anything
        finally:
            reader.cancel()
            for task in list(self.in_flight.values()):
                task.cancel()

    async def _read(self, requests: AsyncIterator[Q], take: Callable[[Q], Any]) -> None:
        try:
            async for request in requests:
                take(request)
                await self._room.wait()
        finally:
            self._reading = False
            self._ready.set()
