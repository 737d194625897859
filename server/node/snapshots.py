"""A node's snapshots: when one is due, and serializing the state machine for it a slice
at a time, between other work; then the log is compacted to it.

A snapshot of a large state takes long (about 0.6 s for 45,000 keys here, more as the
history grows) and every member takes one at about the same log index. Taken in one go,
it stopped heartbeats and their answers on all members at once: the leader lost its
quorum or its followers elected another. Taken in a thread, it held applying back and
then, competing for the GIL, slowed every loop round trip (writes stalled up to 0.9 s).

So the loop captures the state (`CoordMachine.capture`: a few milliseconds) and then
turns it into bytes one slice (a few milliseconds) per loop iteration, while Raft keeps
stepping, persisting, sending and applying in between. The bytes go to a snapshot file
(`snapshot_file`) as they come, and Raft's snapshot is that file: the member never holds
the compressed state whole.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor

from coord.raft import ConfState, RawNode
from coord.raft.types import Snapshot
from coord.server import failpoints, log_lines
from coord.server.snapshot_file import SnapshotFile, SnapshotWriter
from coord.server.storage.log_store import LogStore
from coord.server.transport.snapshot_pieces import Spool

log = logging.getLogger(__name__)

SNAPSHOT_EXPANSION = 4.0
"""Past `snapshot_every` entries, a member snapshots once its log since the last snapshot
holds at least this many times that snapshot's bytes (the Raft dissertation's expansion
factor, §5.1.3, with its example value). A snapshot costs time in proportion to the
whole state, the key history included, so a fixed entry count made a growing state cost
more per write, and without limit: at 64 clients' puts a member spent 0.2 s on a
snapshot at 20,000 entries of history and 0.5 s at 60,000, every 20,000 entries. Tied
to the snapshot's size, its cost per byte of log stays flat however big the state
grows. (A put's entry is about as many bytes as it adds to a compressed snapshot, so a
factor of 1 would barely space them out.)"""
SNAPSHOT_EVERY_MAX = 5
"""...but never more than this many times `snapshot_every` entries (100,000 at the
default, etcd's --snapshot-count): the log lives in memory and is replayed at a restart."""


class Snapshots:
    """When the node snapshots (`snapshot_every` entries and SNAPSHOT_EXPANSION, or
    `snapshot_bytes` of entries, or when `asked`), the snapshot being taken, and the log
    compacted to it. The driver adds the bytes of the entries it applies to `log_bytes`."""

    def __init__(self, name: str, raw: RawNode, store: LogStore, io: Executor,
                 capture: Callable[[], Iterator[bytes]], wake: Callable[[], None],
                 every: int, max_bytes: int) -> None:
        """`capture()`: the node's state as it is now, its bytes to come a slice at a
        time; `wake()` once they have all come."""
        self.name = name
        self._raw, self._store, self._io = raw, store, io
        self._capture, self._wake = capture, wake
        self._every, self._max_bytes = every, max_bytes
        self._task: asyncio.Task[SnapshotFile] | None = None
        self._index = 0
        self._conf = ConfState()
        self._started = 0.0  # monotonic: when the snapshot being taken began
        self.asked = False  # snapshot at the next chance (`Node.request_snapshot`)
        self.log_bytes = 0  # of entries applied since the last snapshot started
        self.listeners: list[Callable[[int, float], None]] = []  # (bytes, seconds) taken

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def after_apply(self, applied: int) -> bool:
        """Start a snapshot at `applied` (the index applied last) if one is due and none
        is being taken; True if the one being taken is done, for the driver to `end`.
        Not a coroutine: the driver calls it after every Ready, and it rarely has
        anything to wait for."""
        if self._task is not None:
            return self._task.done()
        raw = self._raw
        entries = applied - raw.snapshot_index
        outgrown = self.log_bytes >= SNAPSHOT_EXPANSION * raw.snapshot_bytes
        due = ((entries >= self._every and outgrown)
               or entries >= SNAPSHOT_EVERY_MAX * self._every
               or self.log_bytes >= self._max_bytes)
        if not (due or self.asked) or entries <= 0:
            return False
        self.asked = False
        self.log_bytes = 0
        self._started = time.monotonic()
        self._index, self._conf = applied, raw.conf_state
        self._task = asyncio.get_running_loop().create_task(
            write_pieces(self._capture(), SnapshotWriter(self._store.snap_dir, applied)),
            name=f"snapshot-{self.name}")
        self._task.add_done_callback(lambda _: self._wake())
        return False

    async def end(self) -> None:
        """Compact the log to the snapshot taken in the background."""
        task, self._task = self._task, None
        assert task is not None
        index, conf, data = self._index, self._conf, await task
        failpoints.hit("snapshot-capture")
        snap = self._raw.compact(index, data, conf)
        await asyncio.get_running_loop().run_in_executor(self._io, self._store.compact, snap)
        failpoints.hit("snapshot-compact")
        # `coord bench scale` and `coord bench etcd` read this line
        # (coord/bench/footprint.py): keep its shape.
        took = time.monotonic() - self._started
        log.info("%s: took a snapshot of %d bytes at index %d in %.2fs", self.name,
                 len(data), index, took, extra=log_lines.event(log_lines.SNAPSHOT))
        for listener in self.listeners:
            listener(len(data), took)

    def discard(self) -> None:
        """Drop the snapshot being taken: one from the leader is about to replace it."""
        task, self._task = self._task, None
        if task is None:
            return
        if not task.done():
            task.cancel()  # `write_pieces` removes its file
        elif not task.cancelled() and task.exception() is None:
            task.result().remove()  # written, and never to be stored


def drop_if_refused(raw: RawNode, received: Snapshot) -> None:
    """Remove the file of a leader's snapshot `raw` just stepped, unless Raft took it
    (it is then the pending snapshot, which the store keeps). The transport renamed it a
    snapshot file as it arrived, before Raft could say: refused (older than what this
    member has committed, or a log it already holds), nothing will store it or ask for
    it, and a snapshot is as big as the state."""
    if received is not raw.pending_snapshot and isinstance(received.data, SnapshotFile):
        received.data.remove()


async def spool_pieces(pieces: Iterator[bytes],
                       spool_dir: str | os.PathLike[str] | None = None) -> Spool:
    """The pieces written to a spool file in `spool_dir`, the loop running between them
    (one slice each); the caller clears the spool."""
    spool = Spool(spool_dir)
    try:
        for piece in pieces:
            spool.write(piece)
            await asyncio.sleep(0)  # let the loop run between slices
    except BaseException:
        spool.clear()
        raise
    return spool


async def write_pieces(pieces: Iterator[bytes], writer: SnapshotWriter) -> SnapshotFile:
    """The pieces written to a new snapshot file, the loop running between them (one
    slice each; the store makes it durable as it stores it, in its thread); the file
    removed if they fail or the task is cancelled."""
    try:
        for piece in pieces:
            writer.write(piece)
            await asyncio.sleep(0)  # let the loop run between slices
        return writer.done()
    except BaseException:
        writer.discard()
        raise
