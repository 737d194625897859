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
drops the receipt, and the spool is read back (a block at a time) and checked against
that CRC before the snapshot is delivered, so a spool file damaged on disk costs a clean
restart, never a wrong snapshot. Delivered, the spool file is the snapshot: renamed to a
snapshot file (`snapshot_file`) that the message's snapshot refers to, never read into
memory whole. In a member's data dir the spool is a named file with what it holds
beside it (`NAME.held`), so a member restarted mid-transfer resumes too: it reopens the
spool, cut back to what the `.held` file vouches for and checked against its CRC, or
drops both.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import tempfile
import zlib

from google.protobuf.message import DecodeError

from coord.server.snapshot_file import SnapshotFile
from coord.server.transport.snapshot_pieces import Spool
from coord.v1 import raft_pb2

__all__ = ["Outcome", "SnapshotReceipt", "SnapshotReceipts"]

log = logging.getLogger(__name__)

CHECK_BLOCK = 1 << 20
"""Bytes of a reopened spool read at a time to check its CRC."""


class Outcome(enum.Enum):
    KEPT = "kept"  # appended: more to come
    DROPPED = "dropped"  # does not continue what is held: nothing is held now
    CORRUPT = "corrupt"  # complete, but the spool's bytes fail the CRC: nothing held now
    COMPLETE = "complete"  # the last piece: `take` gives the snapshot's file


class SnapshotReceipt:
    """What has arrived of one snapshot from one sender: its identity (index, term,
    size), a spool file of its first `size` bytes (`directory/name`: the member's
    snapshot dir, where the complete file becomes a snapshot file), and their running
    CRC-32; kept on disk across restarts (see the module's note)."""

    def __init__(self, directory: str | os.PathLike[str], name: str) -> None:
        self._spool = Spool(directory, name)
        assert self._spool.path is not None
        self._held_path = self._spool.path + ".held"
        self._id: tuple[int, int, int] | None = None  # index, term, total
        self._crc = 0
        self._complete: SnapshotFile | None = None
        if self._spool.size or os.path.exists(self._held_path):
            self._reopen()

    def _reopen(self) -> None:
        """Take up what a previous run of this member left: the spool cut back to what
        the `.held` file says, if its bytes have that CRC; else nothing."""
        try:
            with open(self._held_path, "rb") as f:
                held = raft_pb2.SnapshotHeld.FromString(f.read())
        except (OSError, DecodeError):
            held = None
        if held is None or not 0 < held.offset <= self._spool.size:
            self.clear()
            return
        self._spool.truncate(held.offset)
        crc = self._spool_crc()
        if crc != held.crc:
            log.warning("dropping a snapshot spool that fails its CRC: %s", self._spool.path)
            self.clear()
            return
        self._id, self._crc = (held.index, held.term, held.total), crc

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
            self._save_held()
            return Outcome.KEPT
        if self._spool.size != chunk.total:
            self.clear()
            return Outcome.DROPPED
        if self._spool_crc() != self._crc:
            self.clear()
            return Outcome.CORRUPT
        complete = self._spool.keep(chunk.index, self._crc)
        self.clear()
        self._complete = complete
        return Outcome.COMPLETE

    def take(self) -> SnapshotFile | None:
        """The snapshot file the last piece completed (once)."""
        complete, self._complete = self._complete, None
        return complete

    def _spool_crc(self) -> int:
        """The CRC-32 of the spool file's bytes, read back a block at a time."""
        crc = 0
        for block in self._spool.blocks(CHECK_BLOCK):
            crc = zlib.crc32(block, crc)
        return crc

    def _save_held(self) -> None:
        """Write what is held beside a named spool (replaced whole, never half written)."""
        held = self.held()
        if held is None:
            return
        tmp = self._held_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(held.SerializeToString())
        os.replace(tmp, self._held_path)

    def clear(self) -> None:
        """Hold nothing (the spool file goes, and what it held with it)."""
        self._spool.clear()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._held_path)
        self._id, self._crc, self._complete = None, 0, None

    def close(self) -> None:
        """Let go of the spool file; a named one stays, for the next run to resume."""
        self._spool.close()
        self._id, self._crc, self._complete = None, 0, None


class SnapshotReceipts:
    """A member's receipts, one per sender (bounded by the cluster's size): a snapshot
    comes from the leader, and a new leader's does not clear its predecessor's.
    `directory`: the member's snapshot dir, made if missing (None: a temporary dir of
    these receipts', removed with the files in it on `close`)."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self._own_dir = (tempfile.TemporaryDirectory(prefix="coord-snapshots-")
                         if directory is None else None)
        self._dir = directory if self._own_dir is None else self._own_dir.name
        os.makedirs(self._dir, exist_ok=True)
        self._by_sender: dict[int, SnapshotReceipt] = {}

    def _receipt(self, from_id: int) -> SnapshotReceipt:
        """`from_id`'s, reopened from the directory when this run has none yet."""
        receipt = self._by_sender.get(from_id)
        if receipt is None:
            receipt = self._by_sender[from_id] = SnapshotReceipt(
                self._dir, f"snapshot-from-{from_id}")
        return receipt

    def add(self, from_id: int, chunk: raft_pb2.SnapshotChunk) -> Outcome:
        """`SnapshotReceipt.add` on `from_id`'s receipt."""
        return self._receipt(from_id).add(chunk)

    def take(self, from_id: int) -> SnapshotFile | None:
        """The snapshot file `from_id`'s last piece completed."""
        return self._by_sender[from_id].take()

    def held(self, from_id: int) -> raft_pb2.SnapshotHeld | None:
        """What to tell `from_id` when it connects (`SnapshotReceipt.held`)."""
        return self._receipt(from_id).held()

    def drop(self, from_id: int) -> None:
        """Forget `from_id`'s receipt, on disk too (it left the cluster)."""
        self._receipt(from_id).clear()
        del self._by_sender[from_id]

    def close(self) -> None:
        """Let go of every spool file (named ones stay for the next run)."""
        for receipt in self._by_sender.values():
            receipt.close()
        self._by_sender.clear()
        if self._own_dir is not None:
            self._own_dir.cleanup()
