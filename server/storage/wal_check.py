"""The check a store's WAL gets before SQLite opens it: that its last frame is whole."""

from __future__ import annotations

import os
from pathlib import Path

from coord.server.storage.log_format import StorageError

__all__ = ["refuse_a_torn_wal"]

_WAL_HEADER = 32  # bytes; the page size is big-endian at bytes 8..12
_FRAME_HEADER = 24  # bytes before each page in the WAL


def refuse_a_torn_wal(path: Path) -> None:
    """Refuse a WAL whose last frame is cut short, before SQLite opens it.

    SQLite replays a WAL up to its last whole commit and silently drops a transaction
    whose frames are cut short, even one whose COMMIT was fsync'd and acknowledged. When
    that transaction held the hard state, the member would forget a vote it cast and
    could vote twice in one term: two leaders. A WAL that does not end on a frame
    boundary was torn, so the member refuses to start and names the file rather than
    come back with less than it promised. (A cut exactly on a frame boundary cannot be
    told from a shorter WAL and is not caught here.)
    """
    wal = path.with_name(path.name + "-wal")
    try:
        with open(wal, "rb") as f:
            header = f.read(_WAL_HEADER)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(wal, f"cannot read the WAL: {e}") from e
    if size == 0:
        return
    if size < _WAL_HEADER:
        raise StorageError(wal, f"the WAL is torn: {size} bytes, shorter than its header; "
                                "it may have held acknowledged writes")
    page = int.from_bytes(header[8:12], "big")
    page = 65536 if page == 1 else page
    if (size - _WAL_HEADER) % (_FRAME_HEADER + page):
        raise StorageError(wal, f"the WAL is torn: {size} bytes do not end on a frame "
                                f"boundary ({page}-byte pages); its last transactions, "
                                "which may have been acknowledged, are cut short")
