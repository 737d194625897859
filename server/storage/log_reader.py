"""A member's log file, opened read-only: what tools and the member's live export read.

The writer is `log_store.LogStore`; this reader shares its format (`log_format`) and
never writes. It is the one module outside the member that the history export
(`coord.history`) may import from the server (tests/test_layout.py names the exception).

How the file is opened decides what a reader may touch. A member that stopped cleanly
leaves no write-ahead log (``raft.db-wal``): the file is then opened ``immutable=1`` and
nothing in the dir is touched, not even a lock. A member that was killed leaves its WAL,
which holds committed entries: the file is opened ``mode=ro`` so they are read (SQLite
may then add the ``-shm`` index beside it; the log itself is never written). A running
member's file (``live``) is read the same way, never ``immutable``: it keeps changing, so
a caller that reads several things reads them in one :meth:`LogReader.transaction`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from coord.raft.types import Entry, HardState, Snapshot
from coord.server.storage import log_format as fmt
from coord.server.storage.log_format import StorageError


@dataclass(frozen=True)
class LogInfo:
    """Where a member's log stands: what a history export needs before reading entries."""

    member: str  # the member's name ("" before its first start stamped it)
    snapshot_index: int  # 0: no snapshot
    first_index: int  # first retained entry after the snapshot
    commit_index: int


class LogReader:
    """One read-only connection to a member's log file (``DATA_DIR/raft.db``).

    Opening refuses a missing file and a schema version this build does not know, naming
    the file. Every method raises StorageError for what cannot be read. The connection
    may be used from another thread (the live export restores a snapshot on one), one
    call at a time.
    """

    def __init__(self, path: str | os.PathLike[str], *, live: bool = False) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise StorageError(self.path, f"no such file (is {self.path.parent} a member's "
                                          "--data-dir?)")
        wal = self.path.with_name(self.path.name + "-wal").exists()
        flags = "mode=ro" if wal or live else "mode=ro&immutable=1"
        try:
            self._conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?{flags}", uri=True,
                                         isolation_level=None, check_same_thread=False)
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error as exc:
            raise StorageError(self.path, f"cannot open read-only: {exc}") from None
        try:
            fmt.check_version(self.path, version)
        except StorageError:
            self._conn.close()
            raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One read transaction: every read inside it sees the same state of the file."""
        with self._sqlite("read"):
            self._conn.execute("BEGIN")
        try:
            yield
        finally:
            with self._sqlite("read"):
                self._conn.execute("COMMIT")

    def info(self) -> LogInfo:
        with self._sqlite("info"):
            name = fmt.read_meta(self._conn, self.path, fmt.NAME_KEY)
            snap_index = fmt.snapshot_index(self._conn)
            commit = fmt.read_hard_state(self._conn, self.path).commit
            first = fmt.first_index_after(self._conn, snap_index)
        return LogInfo(name or "", snap_index, first or snap_index + 1, commit)

    def hard_state(self) -> HardState:
        with self._sqlite("hard_state"):
            return fmt.read_hard_state(self._conn, self.path)

    def snapshot(self) -> Snapshot:
        """The snapshot the log was compacted to; ``Snapshot()`` when there is none."""
        with self._sqlite("snapshot"):
            return fmt.read_snapshot(self._conn, self.path)

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Stored entries with ``lo <= index < hi``, in order, as they are on disk."""
        with self._sqlite("entries"):
            return fmt.read_entries(self._conn, self.path, lo, hi)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _sqlite(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StorageError(self.path, f"{what} failed: {exc}") from None
