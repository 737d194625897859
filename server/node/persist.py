"""Step 1 of a Ready (persist) for the driver: where each Ready is written and how.

A Ready that must be durable (new entries, a snapshot, a new term or vote: etcd's
MustSync) is written in one synced transaction, on the event loop when it is small and in
the storage thread when it is big (`INLINE_SAVE_ENTRIES`, `LEADER_INLINE_ENTRIES`). A
Ready whose only news is the commit index is written without an fsync (etcd's rule: it
survives a process crash, so a restarted member replays its log up to it before it
serves; after a power loss the leader tells it again).
"""

from __future__ import annotations

import asyncio

from coord.raft import Entry, Ready
from coord.server.node.round_counts import CountingExecutor, RoundCounts
from coord.server.storage.log_store import LogStore

INLINE_SAVE_ENTRIES = 64
INLINE_SAVE_BYTES = 1 << 20
"""A follower's Ready of at most this many entries and bytes (and no snapshot) is
persisted on the event loop; bigger ones (catching up) go to the storage thread, so the
loop keeps serving while they are written."""

LEADER_INLINE_ENTRIES = 4
"""A leader's Ready of at most this many new entries is persisted on the event loop too,
unless callers have been waiting behind its batches (`busy`): for a lone caller the
storage thread's round trip (a wake-up there, another back here, and their share of the
GIL) is all cost. A bigger batch means callers keep arriving, and the loop takes them in
while the storage thread waits for the disk."""


def _small(entries: list[Entry], leader: bool) -> bool:
    """Is `entries` persisted on the loop rather than in the storage thread?"""
    if len(entries) > (LEADER_INLINE_ENTRIES if leader else INLINE_SAVE_ENTRIES):
        return False
    return sum(len(e.data) for e in entries) <= INLINE_SAVE_BYTES


class Persister:
    """Writes the driver's Readies to its `LogStore`, one at a time, in their order."""

    def __init__(self, store: LogStore, io: CountingExecutor, counts: RoundCounts) -> None:
        self._store = store
        self._io = io
        self._counts = counts

    def persist(self, rd: Ready, leader: bool, busy: bool = False
                ) -> asyncio.Future[None] | None:
        """Make `rd`'s snapshot, entries and hard state as durable as Raft needs them,
        before the driver goes on to the steps that rely on them: None once written
        here, or the storage thread's write for the driver to await. `busy`: callers
        wait behind the leader's batches, so even a small append goes to the storage
        thread and the loop takes their calls in while the disk works. Not a coroutine:
        the driver calls it for every Ready, and most are written here."""
        hard = rd.hard_state
        if rd.must_sync:
            self._counts.store_writes += 1
            if rd.snapshot is not None or busy or not _small(rd.entries, leader):
                return asyncio.get_running_loop().run_in_executor(
                    self._io, self._store.save, hard, rd.entries, rd.snapshot
                )
            # A small batch is written here (sqlite releases the GIL for the fsync)
            # rather than handed to the storage thread and back, a wake-up each way
            # on the critical path: a follower's Raft work cannot go on until it is
            # durable, and a leader's few entries have sent their appends already.
            self._counts.inline_saves += 1
            self._store.save(hard, rd.entries, rd.snapshot)
        elif hard is not None:
            # Only the commit index moved: written, not fsync'd (see Ready.must_sync), in
            # tens of microseconds with no disk wait and never a checkpoint, so cheaper
            # here than a round trip to the storage thread (idle: Readies go one by one).
            self._counts.store_writes += 1
            self._store.save(hard, [], sync=False)
        return None
