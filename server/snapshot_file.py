"""A member's snapshot lives in a file of its own in the member's snapshot dir
(``DATA_DIR/snap``), never as one buffer in memory.

Raft's `Snapshot.data` in a member is a `SnapshotFile`: the file's path, size and CRC-32,
a few dozen bytes however big the state. Raft only measures it (`len`); the log stores
the file's name, size and CRC beside the snapshot's index and term; the transport reads
it a piece at a time as it sends (`snapshot_pieces`), and the receiver spools the pieces
into a file of this dir that becomes the snapshot (`snapshot_receipt`); a restore
decompresses it a block at a time (`log_format.split_snapshot`). So a member's memory
during a transfer is its state and a few pieces, as etcd's, whose raft snapshot carries
metadata while the snapshot sender streams the backend's file from disk. Held in memory,
the compressed state was a second copy beside the state on the leader (for as long as
the snapshot was its latest) and on the follower that received it.

A file is written once, under a name no other file had (its index, then a random tag),
made durable (the file and the dir fsync'd: `SnapshotFile.durable`) by the log as it
stores it, in the storage thread (an fsync of hundreds of MB on the event loop would
stop the member), and removed once the log stores a newer snapshot (`sweep`), or as
soon as Raft refuses a received one (`node.snapshots.drop_if_refused`). A reader
that opened it before keeps reading it (a transfer under way finishes with the snapshot
it began).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["READ_BLOCK", "SUFFIX", "SnapshotFile", "SnapshotWriter", "adopt", "fsync_dir",
           "snap_dir", "sweep"]

SNAP_DIR = "snap"
"""The snapshot dir's name inside a member's data dir."""
SUFFIX = ".snap"
READ_BLOCK = 1 << 20
"""Bytes of a snapshot file read at a time: a reader's whole buffer."""


def snap_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The snapshot dir of the member whose data dir is `data_dir`."""
    return Path(data_dir) / SNAP_DIR


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A snapshot's bytes, on disk: what Raft's `Snapshot.data` is in a member."""

    path: Path
    size: int
    crc: int  # CRC-32 of the whole file

    def __len__(self) -> int:
        """The snapshot's size in bytes (what Raft measures)."""
        return self.size

    @property
    def index(self) -> int:
        """The log index the snapshot is at, from its name."""
        return _index_of(self.path)

    def open(self) -> BinaryIO:
        """The file, to read (OSError if it is gone)."""
        return open(self.path, "rb", buffering=0)

    def blocks(self) -> Iterator[bytes]:
        """The file's bytes, READ_BLOCK at a time, opened at the first; ValueError, before
        the block that reaches the recorded size is handed out (a reader may stop there:
        a zlib stream ends inside its last block), or after the last one if the file is
        shorter, when they are not the size and CRC-32 recorded (a file damaged on disk)."""
        crc = size = 0
        with self.open() as f:
            while block := f.read(READ_BLOCK):
                crc = zlib.crc32(block, crc)
                size += len(block)
                if size >= self.size:
                    size += len(f.read())  # anything past the recorded size
                    self._check(size, crc)
                yield block
        self._check(size, crc)

    def _check(self, size: int, crc: int) -> None:
        if (size, crc) != (self.size, self.crc):
            raise ValueError(f"snapshot file {self.path} is damaged: {size} bytes with CRC "
                             f"{crc:08x}, recorded as {self.size} with CRC {self.crc:08x}")

    def durable(self) -> None:
        """fsync the file, its dir and the data dir that holds that one (the snapshot
        dir is made when the first snapshot is; its entry must outlast a power loss as
        much as the file's): done before the log names it (OSError if gone)."""
        with self.open() as f:
            os.fsync(f.fileno())
        fsync_dir(self.path.parent)
        fsync_dir(self.path.parent.parent)

    def remove(self) -> None:
        """Delete the file (it was never referred to, or no longer is)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class SnapshotWriter:
    """A new snapshot file in `directory` for the snapshot at `index`, written a piece at
    a time; `done` closes and describes it, `discard` removes it."""

    def __init__(self, directory: str | os.PathLike[str], index: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = _new_name(Path(directory), index)
        self._file: BinaryIO | None = open(self.path, "xb", buffering=0)
        self.size = 0
        self.crc = 0

    def write(self, piece: bytes) -> None:
        """Add the next piece."""
        assert self._file is not None, "written after done or discard"
        view = memoryview(piece)
        while view:
            view = view[self._file.write(view):]
        self.size += len(piece)
        self.crc = zlib.crc32(piece, self.crc)

    def done(self) -> SnapshotFile:
        """The file, complete (durable once the log stores it: `SnapshotFile.durable`)."""
        f, self._file = self._file, None
        assert f is not None, "done twice or after discard"
        f.close()
        return SnapshotFile(self.path, self.size, self.crc)

    def discard(self) -> None:
        """Remove what was written (the snapshot was abandoned)."""
        f, self._file = self._file, None
        if f is not None:
            f.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def adopt(path: str | os.PathLike[str], index: int, size: int, crc: int) -> SnapshotFile:
    """The complete file at `path` (a received snapshot's spool, of `size` bytes with
    CRC-32 `crc`) renamed to be the snapshot file at `index` in its own dir."""
    path = Path(path)
    target = _new_name(path.parent, index)
    os.replace(path, target)
    return SnapshotFile(target, size, crc)


def sweep(directory: str | os.PathLike[str], kept: SnapshotFile | None,
          everything_else: bool = False) -> None:
    """Remove the snapshot files of `directory` no newer than `kept` (the log's
    snapshot), but it: no one will ask for them again (one received at the same index
    is one Raft refused, as it already had it); with `everything_else`, every one but
    `kept` (at start-up: the newer ones were being written or received when the member
    stopped, and nothing refers to them)."""
    keep_index = kept.index if kept is not None else 0
    with contextlib.suppress(FileNotFoundError):
        for path in Path(directory).iterdir():
            if path.suffix != SUFFIX or (kept is not None and path == kept.path):
                continue
            try:
                index = _index_of(path)
            except ValueError:
                continue  # not one of ours
            if everything_else or index <= keep_index:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _new_name(directory: Path, index: int) -> Path:
    return directory / f"{index:016x}-{secrets.token_hex(4)}{SUFFIX}"


def _index_of(path: Path) -> int:
    """ValueError for a name that is not `_new_name`'s."""
    head, _, _tag = path.stem.partition("-")
    return int(head, 16)


def fsync_dir(directory: Path) -> None:
    """Make `directory`'s entries (a file made, renamed) durable (OSError if it cannot)."""
    if os.name != "posix":
        return  # directories cannot be opened for fsync elsewhere
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
