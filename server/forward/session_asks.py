"""A follower's keepalives (and TTL queries) go to the leader in batches.

Only the leader knows session deadlines, so a follower forwards every keepalive its
clients send. One call per keepalive costs the leader a gRPC call each: 100k sessions
renewed every TTL/3 make ~10k calls/s, more than a Python leader serves, and the
keepalives that time out leave live sessions to expire — which is what happened to
every one of 100k sessions whose keepalives were on a member that lost its leadership
(`coord bench scale --phases sessions`, before this). ZooKeeper's followers likewise
hand their clients' session touches to the leader in batches.

Here it is group commit: a keepalive goes at once when no call is out and none went in
the last `MIN_GAP_S`, else it waits and goes with the others that arrived meanwhile in
the next call (at most `MAX_IDS` each). Under light load each goes alone and nothing
waits; under heavy load a follower makes at most 1/MIN_GAP_S calls a second, each with
many ids (a call costs the leader a few hundred µs: with calls back to back, batches of
3-5 keepalives cost it about as much as taking them directly). The `Forward.KeepAlive` and
`Forward.Remaining` RPCs always took a list.

An asker that gives up (its client is told `pending`) does not take its keepalive
back: it still goes to the leader with the next call. Dropping it would leave a busy
cluster, whose calls take longer than an asker waits, renewing nothing at all (measured:
45,003 of 100,000 sessions expired that way with their keepalives spread over the
members). A renewal that arrives late is still a renewal the client asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 1
MAX_IDS = 4096
MIN_GAP_S = 0.01  # between the starts of two calls: keepalives wait at most this long
MAX_WAITING = 16 * MAX_IDS  # queued asks: past it, those whose askers gave up are dropped

# the leader's answers per id, in order: the TTL (ms), -1 gone, 0 it cannot tell yet
Call = Callable[[list[int]], Awaitable[list[int]]]


def _give_up(fut: asyncio.Future[int | None]) -> None:
    if not fut.done():
        fut.set_result(None)


class SessionAsks:
    """Batches one kind of question (renew, or time left) to one leader."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._queue: list[tuple[int, asyncio.Future[int | None]]] = []
        self._in_flight: set[asyncio.Task] = set()
        self._last_call = float("-inf")  # loop time the last call started
        self._timer: asyncio.TimerHandle | None = None

    async def ask(self, session_id: int, timeout: float) -> int | None:
        """The leader's answer for the session (TTL ms, or -1 gone); None if it could not
        say within `timeout` (no answer, a failed call, or it cannot tell yet)."""
        return await self.ask_soon(session_id, timeout)

    def ask_soon(self, session_id: int, timeout: float) -> asyncio.Future[int | None]:
        """`ask` as a future (a caller with many asks out needs no task for each)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int | None] = loop.create_future()
        if len(self._queue) >= MAX_WAITING:  # a leader that does not answer: bounded
            self._queue = [(sid, f) for sid, f in self._queue if not f.done()]
            if len(self._queue) >= MAX_WAITING:
                fut.set_result(None)
                return fut
        self._queue.append((session_id, fut))
        self._pump()
        if not fut.done():
            loop.call_later(timeout, _give_up, fut)
        return fut

    def _pump(self) -> None:
        if not self._queue or len(self._in_flight) >= MAX_IN_FLIGHT or self._timer:
            return
        loop = asyncio.get_running_loop()
        wait = self._last_call + MIN_GAP_S - loop.time()
        if wait > 0:
            self._timer = loop.call_later(wait, self._waited)
            return
        self._last_call = loop.time()
        batch = self._queue[:MAX_IDS]  # given up or not: see the module's docstring
        del self._queue[:MAX_IDS]
        task = loop.create_task(self._send(batch))
        self._in_flight.add(task)
        task.add_done_callback(self._sent)

    def _waited(self) -> None:
        self._timer = None
        self._pump()

    def _sent(self, task: asyncio.Task) -> None:
        self._in_flight.discard(task)
        self._pump()

    async def _send(self, batch: list[tuple[int, asyncio.Future[int | None]]]) -> None:
        try:
            ttls: list[int] | None = await self._call([sid for sid, _ in batch])
        except Exception as exc:  # the leader went or failed: these go unanswered now
            log.debug("forwarding %d session asks failed: %r", len(batch), exc)
            ttls = None
        for i, (_, fut) in enumerate(batch):
            if not fut.done():
                ttl = ttls[i] if ttls is not None and i < len(ttls) else 0
                fut.set_result(None if ttl == 0 else ttl)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._in_flight):
            task.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        for _, fut in self._queue:
            fut.cancel()
        self._queue.clear()
