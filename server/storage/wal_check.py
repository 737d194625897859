"""The check a store's WAL gets before SQLite opens it (that its last frame is whole, or
cut where only a crash of the writing process cuts it), and the trim of the partial frame
a failed write of the store's own leaves behind."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from coord.server.storage.log_format import StorageError

__all__ = ["check_the_wal_tail", "trim_a_failed_write"]

log = logging.getLogger(__name__)

_WAL_HEADER = 32  # bytes; the page size is big-endian at bytes 8..12
_FRAME_HEADER = 24  # bytes before each page in the WAL


def check_the_wal_tail(path: Path) -> None:
    """Refuse a WAL whose last frame is torn, before SQLite opens it; cut off the frame
    header a killed writer leaves.

    SQLite replays a WAL up to its last whole commit and silently drops a transaction
    whose frames are cut short, even one whose COMMIT was fsync'd and acknowledged. When
    that transaction held the hard state, the member would forget a vote it cast and
    could vote twice in one term: two leaders. A WAL that does not end on a frame
    boundary was torn, so the member refuses to start and names the file rather than
    come back with less than it promised.

    One cut is not a tear: SQLite writes a frame as two writes, its 24-byte header, then
    its page, and fsyncs only after a transaction's last page. A process killed between
    the two writes (kill -9, the OOM killer) leaves exactly a header past the last whole
    frame; that frame's transaction never reached its fsync, so it was never
    acknowledged. That header is cut off and the member starts, as etcd repairs the torn
    tail of its own WAL. (A cut exactly on a frame boundary cannot be told from a shorter
    WAL and is not caught here.)
    """
    wal = _wal_of(path)
    try:
        size, frame = _size_and_frame(wal)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(wal, f"cannot read the WAL: {e}") from e
    if size == 0:
        return
    if size < _WAL_HEADER:
        raise StorageError(wal, f"the WAL is torn: {size} bytes, shorter than its header; "
                                "it may have held acknowledged writes")
    partial = (size - _WAL_HEADER) % frame
    if partial == _FRAME_HEADER:
        _cut(wal, size - partial)
        log.warning("%s: cut off a frame header without its page (%d bytes): the write a "
                    "process killed mid-frame leaves; its transaction was never committed",
                    wal, partial)
    elif partial:
        raise StorageError(wal, f"the WAL is torn: {size} bytes do not end on a frame "
                                f"boundary ({frame - _FRAME_HEADER}-byte pages); its last "
                                "transactions, which may have been acknowledged, are cut "
                                "short")


def trim_a_failed_write(path: Path) -> None:
    """Cut the WAL back to its last whole frame after a write of ours failed.

    A write that fails part way (a full disk: SQLite wrote a frame's header, not its
    page) leaves a partial frame at the WAL's end. That transaction was never
    acknowledged, so dropping it loses nothing; left in place, `check_the_wal_tail` could
    not tell it from an acknowledged one torn later, and the member would refuse to start
    once the disk had room again. Cutting a file shorter needs no free space.
    """
    wal = _wal_of(path)
    try:
        size, frame = _size_and_frame(wal)
        if size > _WAL_HEADER and (size - _WAL_HEADER) % frame:
            _cut(wal, size - (size - _WAL_HEADER) % frame)
    except OSError:
        return  # nothing of ours to cut: a store that cannot be read is refused at start


def _cut(wal: Path, size: int) -> None:
    """Cut `wal` to `size` bytes, durably: a crash right after must not bring the tail back."""
    os.truncate(wal, size)
    fd = os.open(wal, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _size_and_frame(wal: Path) -> tuple[int, int]:
    """The WAL's size and its frame's bytes (a frame header and a page)."""
    with open(wal, "rb") as f:
        header = f.read(_WAL_HEADER)
        size = os.fstat(f.fileno()).st_size
    page = int.from_bytes(header[8:12], "big") if len(header) == _WAL_HEADER else 0
    page = 65536 if page == 1 else page
    return size, _FRAME_HEADER + page
