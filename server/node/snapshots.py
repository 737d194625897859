"""Serializing the state machine for a snapshot a slice at a time, between other work.

A snapshot of a large state takes long (about 0.6 s for 45,000 keys here, more as the
history grows) and every member takes one at about the same log index. Taken in one go,
it stopped heartbeats and their answers on all members at once: the leader lost its
quorum or its followers elected another. Taken in a thread, it held applying back and
then, competing for the GIL, slowed every loop round trip (writes stalled up to 0.9 s).

So the loop captures the state (`CoordMachine.capture`: a few milliseconds) and then
turns it into bytes one slice (a few milliseconds) per loop iteration, while Raft keeps
stepping, persisting, sending and applying in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from coord.raft import ConfState


class BackgroundSnapshot:
    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[bytes] | None = None
        self._index = 0
        self._conf = ConfState()

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def start(
        self,
        index: int,
        conf: ConfState,
        pieces: Iterator[bytes],
        on_done: Callable[[], None],
    ) -> None:
        """Join `pieces` (a capture of the state at applied `index`, where the cluster
        configuration was `conf`), one per loop iteration; `on_done` runs at the end."""
        self._index, self._conf = index, conf
        self._task = asyncio.get_running_loop().create_task(
            join_pieces(pieces), name=f"snapshot-{self.name}"
        )
        self._task.add_done_callback(lambda _: on_done())

    async def result(self) -> tuple[int, ConfState, bytes]:
        """(index, conf, data); the snapshot is over."""
        task, self._task = self._task, None
        assert task is not None
        return self._index, self._conf, await task

    def discard(self) -> None:
        """Drop the snapshot being taken: one from the leader is about to replace it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()


async def join_pieces(pieces: Iterator[bytes]) -> bytes:
    """The pieces joined, the loop running between them (one slice each)."""
    out = []
    for piece in pieces:
        out.append(piece)
        await asyncio.sleep(0)  # let the loop run between slices
    return b"".join(out)
