"""A snapshot message crosses a peer connection in pieces: cut on the sending side
(`cut`, one piece per batch, each read from the snapshot's file as its batch is
written), put back together on the receiving one (`Spool`, kept per sender by
`snapshot_receipt`, the file that becomes the receiver's snapshot). No message of
hundreds of MiB to build, no snapshot held whole on either side, and heartbeats
interleave with the pieces instead of queueing behind one huge write.
Each piece names its snapshot (index, term) and carries the CRC-32 of the snapshot's
bytes up to its end, so a receiver holding the first part of a transfer that was cut
can tell the sender where to resume (`cut`'s `held`) and both can check what is held."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from coord.raft.types import Message, MessageType
from coord.server.snapshot_file import READ_BLOCK, SnapshotFile, adopt
from coord.server.transport.raft_proto import fill_message_pb
from coord.v1 import raft_pb2

__all__ = ["CHUNK_BYTES", "Piece", "Spool", "Transfer", "cut", "fill_piece", "needs_cutting"]

log = logging.getLogger(__name__)

CHUNK_BYTES = 4 * 1024 * 1024
"""A snapshot goes as pieces of (at most) this size, one per batch."""


@dataclasses.dataclass(slots=True)
class Transfer:
    """One snapshot being sent in pieces: its identity, its file (open from the cut on:
    a newer snapshot may remove it meanwhile, and this one is sent to the end), and the
    CRC-32 of its bytes up to the end of the last piece written (the pieces are written
    in order), and the CRC-32 its file was recorded with, which the whole must match
    before the last piece goes (the receiver checks what it was sent, not what the
    snapshot was). The file closes after the last piece, or when a piece cannot be
    read."""

    index: int
    term: int
    crc: int
    file: BinaryIO
    recorded_crc: int


@dataclasses.dataclass(slots=True)
class Piece:
    """A queued piece of a snapshot message; `type` lets the queue's snapshot
    bookkeeping count it as the snapshot it is part of."""

    to: int
    offset: int
    total: int
    size: int  # bytes from `offset`: read from the file only as its batch is written
    message: Message | None  # on the last piece: the message, its snapshot data empty
    transfer: Transfer
    type: MessageType = MessageType.SNAP


def needs_cutting(m: Message) -> bool:
    """Does `m` carry a snapshot's file (so goes as pieces)?"""
    return m.snapshot is not None and isinstance(m.snapshot.data, SnapshotFile)


def cut(m: Message, held: raft_pb2.SnapshotHeld | None = None) -> list[Piece]:
    """`m`'s pieces, from the first byte the receiver does not hold: `held`, what it
    said it holds when this connection opened, if that is the start of this very
    snapshot (its identity, size and CRC-32 agree), else from the start. OSError if the
    snapshot's file is gone (a newer snapshot replaced it before this one was cut)."""
    assert m.snapshot is not None and isinstance(m.snapshot.data, SnapshotFile)
    snap, meta = m.snapshot.data, m.snapshot.meta
    f = snap.open()
    start, crc = _resume_point(f, snap.size, meta.index, meta.term, held)
    if start:
        log.info("resuming a snapshot (index %d) to %d at byte %d of %d: it holds the rest",
                 meta.index, m.to, start, snap.size)
    transfer = Transfer(meta.index, meta.term, crc, f, snap.crc)
    bare = dataclasses.replace(m, snapshot=dataclasses.replace(m.snapshot, data=b""))
    starts = range(start, snap.size, CHUNK_BYTES)
    return [Piece(m.to, i, snap.size, min(CHUNK_BYTES, snap.size - i),
                  bare if i == starts[-1] else None, transfer) for i in starts]


def _resume_point(f: BinaryIO, size: int, index: int, term: int,
                  held: raft_pb2.SnapshotHeld | None) -> tuple[int, int]:
    """(offset, CRC-32 of the bytes before it) to send from: (0, 0) unless `held` is
    a proper start of the `size` bytes of `f`."""
    if (held is None or (held.index, held.term, held.total) != (index, term, size)
            or not 0 < held.offset < size):
        return 0, 0
    crc = 0
    for offset in range(0, held.offset, READ_BLOCK):
        crc = zlib.crc32(_read(f, offset, min(READ_BLOCK, held.offset - offset)), crc)
    return (held.offset, crc) if crc == held.crc else (0, 0)


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    """`size` bytes of `f` at `offset` (OSError if the file is shorter)."""
    data = os.pread(f.fileno(), size, offset)
    if len(data) != size:
        raise OSError(f"snapshot file ended at byte {offset + len(data)}, before "
                      f"{offset + size}")
    return data


def fill_piece(c: Piece, batch: raft_pb2.MessageBatch) -> int:
    """Write `c` into `batch` (a batch of its own), reading it from its file now; return
    the messages it counts as. OSError, the batch untouched and the file closed, if the
    file is shorter than the snapshot or, at the last piece, not the bytes it was
    recorded with (damaged on disk: sending it would pass the damage on)."""
    t = c.transfer
    try:
        data = _read(t.file, c.offset, c.size)
        t.crc = zlib.crc32(data, t.crc)
        if c.message is not None and t.crc != t.recorded_crc:
            raise OSError(f"snapshot file of index {t.index} is damaged: CRC {t.crc:08x}, "
                          f"recorded as {t.recorded_crc:08x}")
    except OSError:
        t.file.close()
        raise
    chunk = batch.chunk
    chunk.offset, chunk.total, chunk.data = c.offset, c.total, data
    chunk.index, chunk.term, chunk.crc = t.index, t.term, t.crc
    if c.message is not None:
        fill_message_pb(chunk.message, c.message)
        t.file.close()
    return 1


class Spool:
    """A snapshot's bytes as they come, piece by piece, written to a file and read back
    a block at a time (`blocks`), never held whole: a member receives a leader's
    snapshot so (the file then becomes its snapshot file: `keep`), and the etcd API's
    Snapshot sends a capture from one. `directory`: where the file goes (the member's
    snapshot dir; None: the system's temporary dir). Without a `name` the file is
    unlinked (it goes with its descriptor); with one it is `directory/name`, which
    outlives the process until kept or cleared (a receipt a restarted member resumes:
    `snapshot_receipt`), and is reopened as it was left."""

    def __init__(self, directory: str | os.PathLike[str] | None = None,
                 name: str | None = None) -> None:
        self._dir = directory
        self.path = None if directory is None or name is None else os.path.join(directory,
                                                                                 name)
        self._file: BinaryIO | None = None
        self.size = 0
        if self.path is not None and os.path.exists(self.path):
            self._file = open(self.path, "r+b", buffering=0)
            self.size = self._file.seek(0, os.SEEK_END)

    def write(self, data: bytes) -> None:
        """Add the next piece."""
        if self._file is None:
            self._file = (tempfile.TemporaryFile(dir=self._dir, prefix="snapshot-",
                                                 buffering=0) if self.path is None
                          else open(self.path, "w+b", buffering=0))
        view = memoryview(data)
        while view:
            view = view[self._file.write(view):]
        self.size += len(data)

    def truncate(self, size: int) -> None:
        """Keep only the first `size` bytes written."""
        if self._file is not None and size < self.size:
            self._file.truncate(size)
            self._file.seek(size)
            self.size = size

    def blocks(self, size: int) -> Iterator[bytes]:
        """What was written so far, from the start, `size` bytes at a time: a reader that
        never holds it whole (the spool keeps it)."""
        if self._file is None:
            return
        fd = self._file.fileno()
        for offset in range(0, self.size, size):
            yield os.pread(fd, min(size, self.size - offset), offset)

    def keep(self, index: int, crc: int) -> SnapshotFile:
        """A named spool's file, complete (its CRC-32 `crc`), made the snapshot file at
        `index` (`snapshot_file.adopt`); the spool starts over empty."""
        assert self.path is not None, "only a named spool is kept"
        size = self.size
        self.close()
        return adopt(self.path, index, size, crc)

    def clear(self) -> None:
        """Drop what was written (a piece went missing, the connection ended)."""
        self.close()
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def close(self) -> None:
        """Let go of the file: an unlinked one goes, a named one stays."""
        f, self._file = self._file, None
        self.size = 0
        if f is not None:
            f.close()
