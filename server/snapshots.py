"""Serializing the state machine for a snapshot in a thread, off the event loop.

A snapshot of a large state takes long (about 0.6-0.8 s for 45,000 keys here) and every
member takes one at about the same log index. Taken in the loop, it stopped heartbeats
and their answers on all members at once: the leader lost its quorum or its followers
elected another. While the thread serializes, the driver keeps stepping Raft, persisting
and sending, and holds back only applying: entries committed meanwhile wait here, so
the state the thread reads does not change under it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from coord.raft import Entry


class BackgroundSnapshot:
    def __init__(self, name: str, capture: Callable[[], bytes]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"snap-{name}")
        self._capture = capture
        self._task: asyncio.Future | None = None
        self._index = 0
        self.deferred: list[Entry] = []  # committed while it runs, to apply after it

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def start(self, index: int, on_done: Callable[[], None]) -> None:
        """Capture the state, which is at applied `index`; `on_done` runs when it is."""
        self._index = index
        self._task = asyncio.get_running_loop().run_in_executor(self._pool, self._capture)
        self._task.add_done_callback(lambda _: on_done())

    async def result(self) -> tuple[int, bytes, list[Entry]]:
        """(index, data, entries held back meanwhile); the snapshot is over."""
        task, self._task = self._task, None
        deferred, self.deferred = self.deferred, []
        assert task is not None
        return self._index, await task, deferred

    async def discard(self) -> None:
        """Wait for the thread, dropping its data and what was held back: a snapshot
        from the leader is about to replace them both."""
        task, self._task = self._task, None
        self.deferred = []
        if task is not None:
            await asyncio.wait([task])

    def close(self) -> None:
        self._pool.shutdown(wait=True)
