"""The receiving side of a snapshot sent in pieces (`snapshot_pieces`), one per sender,
kept across that sender's connections so a transfer cut half way resumes.

A connection that ends mid-transfer (a peer cut off, a dropped link, the receiving
connection restarted) used to throw away every piece received, and the leader sent the
snapshot again from its first byte: a state of hundreds of MiB crossed again for each
cut. Now the pieces stay in the sender's `SnapshotReceipt` (its spool file), and when the
sender connects again the listener's ACCEPT tells it what is held (`held`: the
snapshot's index, term and size, how many bytes, and their CRC-32); the sender of that
very snapshot starts at that offset (`snapshot_pieces.cut`). A different snapshot (a
newer one) starting at offset 0 replaces what was held. Every piece carries the CRC-32
of the snapshot's bytes up to its end: a piece that does not continue what is held
drops the receipt, and the spool is read back and checked against that CRC before the
snapshot is delivered, so a spool file damaged on disk costs a clean restart, never a
wrong snapshot.
"""

from __future__ import annotations

import enum
import os
import zlib

from coord.server.transport.snapshot_pieces import Spool
from coord.v1 import raft_pb2

__all__ = ["Outcome", "SnapshotReceipt", "SnapshotReceipts"]

CHECK_BLOCK = 1 << 20
"""Bytes of the spool read at a time when checking its CRC before delivery."""


class Outcome(enum.Enum):
    KEPT = "kept"  # appended: more to come
    DROPPED = "dropped"  # does not continue what is held: nothing is held now
    CORRUPT = "corrupt"  # complete, but the spool's bytes fail the CRC: nothing held now
    COMPLETE = "complete"  # the last piece: `take` gives the whole snapshot


class SnapshotReceipt:
    """What has arrived of one snapshot from one sender: its identity (index, term,
    size), a spool file of its first `size` bytes, and their running CRC-32."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._spool = Spool(directory)
        self._id: tuple[int, int, int] | None = None  # index, term, total
        self._crc = 0
        self._complete = b""

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._spool.size

    def held(self) -> raft_pb2.SnapshotHeld | None:
        """What to tell the sender when it connects: None if nothing is held."""
        if self._id is None or not self._spool.size:
            return None
        index, term, total = self._id
        return raft_pb2.SnapshotHeld(index=index, term=term, total=total,
                                     offset=self._spool.size, crc=self._crc)

    def add(self, chunk: raft_pb2.SnapshotChunk) -> Outcome:
        """Take the next piece `chunk`. A piece at offset 0 starts over (a sender that
        did not resume from what is held does not vouch for it); one that does not
        continue what is held, or whose CRC does not follow from it, drops everything."""
        ident = (chunk.index, chunk.term, chunk.total)
        if chunk.offset == 0:
            self.clear()
            self._id = ident
        if ident != self._id or chunk.offset != self._spool.size:
            self.clear()
            return Outcome.DROPPED
        crc = zlib.crc32(chunk.data, self._crc)
        if crc != chunk.crc:
            self.clear()
            return Outcome.DROPPED
        self._spool.write(chunk.data)
        self._crc = crc
        if not chunk.HasField("message"):
            return Outcome.KEPT
        if self._spool.size != chunk.total:
            self.clear()
            return Outcome.DROPPED
        data, expected = self._spool.take(), self._crc
        self.clear()
        if _crc(data) != expected:
            return Outcome.CORRUPT
        self._complete = data
        return Outcome.COMPLETE

    def take(self) -> bytes:
        """The snapshot the last piece completed (once)."""
        data, self._complete = self._complete, b""
        return data

    def clear(self) -> None:
        """Hold nothing (the spool file goes)."""
        self._spool.clear()
        self._id, self._crc, self._complete = None, 0, b""


class SnapshotReceipts:
    """A member's receipts, one per sender (bounded by the cluster's size): a snapshot
    comes from the leader, and a new leader's does not clear its predecessor's."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._dir = directory
        self._by_sender: dict[int, SnapshotReceipt] = {}

    def add(self, from_id: int, chunk: raft_pb2.SnapshotChunk) -> Outcome:
        """`SnapshotReceipt.add` on `from_id`'s receipt."""
        receipt = self._by_sender.get(from_id)
        if receipt is None:
            receipt = self._by_sender[from_id] = SnapshotReceipt(self._dir)
        return receipt.add(chunk)

    def take(self, from_id: int) -> bytes:
        """The snapshot `from_id`'s last piece completed."""
        return self._by_sender[from_id].take()

    def held(self, from_id: int) -> raft_pb2.SnapshotHeld | None:
        """What to tell `from_id` when it connects (`SnapshotReceipt.held`)."""
        receipt = self._by_sender.get(from_id)
        return None if receipt is None else receipt.held()

    def drop(self, from_id: int) -> None:
        receipt = self._by_sender.pop(from_id, None)
        if receipt is not None:
            receipt.clear()

    def clear(self) -> None:
        for from_id in list(self._by_sender):
            self.drop(from_id)


def _crc(data: bytes) -> int:
    view = memoryview(data)
    crc = 0
    for start in range(0, len(view), CHECK_BLOCK):
        crc = zlib.crc32(view[start:start + CHECK_BLOCK], crc)
    return crc
