"""Reading a stopped member's history from its data dir: SQLite opened read-only.

The member keeps one SQLite file, `DATA_DIR/raft.db` (see the README's Storage section).
This reader relies on exactly these parts of it, and refuses a file whose schema version
it does not know:
  - `PRAGMA user_version` = 1;
  - `log(idx INTEGER, term INTEGER, type INTEGER, data BLOB)`: the retained entries;
  - `snapshot(id = 1, idx, term, voters, learners, data)`: at most one row, the snapshot
    the log was compacted to (its `data` as `coord.history.replay` describes);
  - `hard_state(id = 1, term, vote, commit_index)`: only entries up to `commit_index`
    are committed, and only those are history;
  - `meta(key, value)`: `name` is the member's name; `log_version` the version of the
    log's meaning the data began under (none: 1), which says the revision the state
    machine starts from (`coord.sm.ledger.initial_revision`).
A member that stopped cleanly leaves no write-ahead log (`raft.db-wal`): the file is
then opened `immutable=1` and nothing in the dir is touched, not even a lock. A member
that was killed leaves its WAL, which holds committed entries: the file is opened
`mode=ro` so they are read (SQLite may then add the `-shm` index beside it; the log
itself is never written). A running member's file is read the same way (`live`: never
`immutable`), one read transaction per page (`MemberLog.step`): its log keeps being
compacted, so a page that finds the entries after its position gone fails with
`Compacted` rather than skip them. The member serves this as its live export
(coord.server.api.history).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from coord.history.replay import Replayer
from coord.history.rows import Row
from coord.sm.ledger import initial_revision

DB_NAME = "raft.db"
KNOWN_SCHEMA = 1


class DataDirError(Exception):
    """The data dir cannot be read as a coord member's (says which file and why)."""


@dataclass(frozen=True)
class DataDirInfo:
    member: str
    snapshot_index: int
    first_index: int  # first retained entry after the snapshot
    commit_index: int
    log_version: int | None = None  # None: stamped before versions (version 1)


def _connect(data_dir: str | os.PathLike[str], live: bool = False) -> sqlite3.Connection:
    path = Path(data_dir) / DB_NAME
    if not path.is_file():
        raise DataDirError(f"{path}: no such file (is {data_dir} a member's --data-dir?)")
    try:
        wal = path.with_name(path.name + "-wal").exists()
        flags = "mode=ro" if wal or live else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?{flags}", uri=True,
                               isolation_level=None, check_same_thread=False)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise DataDirError(f"{path}: cannot open read-only: {exc}") from None
    if version != KNOWN_SCHEMA:
        conn.close()
        raise DataDirError(f"{path}: schema version {version}; this reader knows {KNOWN_SCHEMA}")
    return conn


def info(data_dir: str | os.PathLike[str]) -> DataDirInfo:
    conn = _connect(data_dir)
    try:
        return _info(conn)
    finally:
        conn.close()


def _info(conn: sqlite3.Connection) -> DataDirInfo:
    name = conn.execute("SELECT value FROM meta WHERE key = 'name'").fetchone()
    version = conn.execute("SELECT value FROM meta WHERE key = 'log_version'").fetchone()
    snap = conn.execute("SELECT idx FROM snapshot WHERE id = 1").fetchone()
    hard = conn.execute("SELECT commit_index FROM hard_state WHERE id = 1").fetchone()
    snap_index = snap[0] if snap else 0
    first = conn.execute("SELECT min(idx) FROM log WHERE idx > ?", (snap_index,)).fetchone()[0]
    if version is not None and not str(version[0]).isdigit():
        raise DataDirError(f"bad log_version {version[0]!r} in the data dir's meta")
    return DataDirInfo(name[0] if name else "", snap_index, first or snap_index + 1,
                       hard[0] if hard else 0, int(version[0]) if version else None)


class Compacted(DataDirError):
    """The entries asked for are gone: the log was compacted to a snapshot after them.
    `oldest_index` is the first entry still exportable; `compact_revision` the revision
    of that snapshot when known (rows from `compact_revision + 1` on are complete)."""

    def __init__(self, message: str, oldest_index: int, compact_revision: int = 0) -> None:
        super().__init__(message)
        self.oldest_index = oldest_index
        self.compact_revision = compact_revision


PAGE_ENTRIES = 2_000


class MemberLog:
    """A member's committed history, replayed page by page from its snapshot through the
    real state machine (`Replayer`); rows of entries up to `after_index`, and rows below
    `from_revision`, are replayed but not returned. Refuses (`Compacted`) a start the
    snapshot has swallowed: `after_index` before the snapshot, or a `from_revision` at or
    below the snapshot's revision (some of its rows would be missing)."""

    def __init__(self, data_dir: str | os.PathLike[str], after_index: int = 0,
                 from_revision: int = 0, *, live: bool = False, label: str = "") -> None:
        self.data_dir = data_dir
        self.label = label or str(data_dir)  # how errors name the member
        self.after_index = after_index
        self.from_revision = from_revision
        self.replayer = Replayer()
        self.info = DataDirInfo("", 0, 0, 0)
        self._conn = _connect(data_dir, live=live)
        self._started = False

    @property
    def started(self) -> bool:
        """The snapshot was restored (the first step)."""
        return self._started

    @property
    def replayed_index(self) -> int:
        return self.replayer.last_index

    @property
    def caught_up(self) -> bool:
        return self._started and self.replayer.last_index >= self.info.commit_index

    def step(self, max_entries: int = PAGE_ENTRIES, upto: int | None = None) -> list[Row]:
        """Rows of the next `max_entries` committed entries (at most up to `upto`), read
        in one transaction; [] when caught up."""
        conn = self._conn
        try:
            conn.execute("BEGIN")
            try:
                self.info = _info(conn)
                if not self._started:
                    self._start(conn)
                elif self.info.snapshot_index > self.replayer.last_index:
                    raise Compacted(
                        f"{self.label}: compacted to index {self.info.snapshot_index} while "
                        f"entry {self.replayer.last_index + 1} was next; export again from "
                        f"index {self.info.snapshot_index + 1}", self.info.snapshot_index + 1)
                hi = min(self.info.commit_index, self.replayer.last_index + max_entries)
                if upto is not None:
                    hi = min(hi, upto)
                cursor = conn.execute(
                    "SELECT idx, term, type, data FROM log WHERE idx > ? AND idx <= ? "
                    "ORDER BY idx", (self.replayer.last_index, hi))
                out: list[Row] = []
                for index, term, entry_type, data in cursor:
                    rows, _ = self.replayer.apply(index, term, entry_type, data)
                    out += self._wanted(rows)
                if self.replayer.last_index < hi:
                    raise DataDirError(f"{self.data_dir}: entries {self.replayer.last_index + 1}"
                                       f"..{hi} are committed but missing from the log")
                return out
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise DataDirError(f"{self.data_dir}: {exc}") from None

    def _start(self, conn: sqlite3.Connection) -> None:
        # where its log began (a snapshot, if any, then sets its own revision)
        self.replayer.machine.start_at(initial_revision(self.info.log_version))
        snap = conn.execute("SELECT idx, data FROM snapshot WHERE id = 1").fetchone()
        if snap is not None:
            try:
                self.replayer.restore(snap[0], snap[1])
            except ValueError as exc:
                raise DataDirError(f"{self.data_dir}: snapshot at index {snap[0]}: {exc}") from None
        self._started = True
        index, revision = self.info.snapshot_index, self.replayer.machine.revision
        if not index:
            return
        if 0 < self.after_index < index:
            raise Compacted(
                f"{self.label}: compacted to index {index} (revision {revision}); entries "
                f"{self.after_index + 1}..{index} are gone; the oldest exportable is entry "
                f"{index + 1} (revisions from {revision + 1})", index + 1, revision)
        if 0 < self.from_revision <= revision:
            raise Compacted(
                f"{self.label}: revision {self.from_revision} is compacted (snapshot at "
                f"index {index}, revision {revision}); the oldest available revision is "
                f"{revision + 1}", index + 1, revision)

    def _wanted(self, rows: list[Row]) -> list[Row]:
        after, since = self.after_index, self.from_revision
        if not after and not since:
            return rows
        return [r for r in rows if r["index"] > after and r["revision"] >= since]

    def flush(self) -> list[Row]:
        """At the end of what is to be read: the rows still held (see Replayer.flush)."""
        return self._wanted(self.replayer.flush())

    def close(self) -> None:
        self._conn.close()


def read_rows(data_dir: str | os.PathLike[str], after_index: int = 0,
              from_revision: int = 0) -> Iterator[Row]:
    """History rows of every committed entry the member retains, from its snapshot on;
    `after_index` skips entries already exported (they are still replayed)."""
    log = MemberLog(data_dir, after_index, from_revision)
    try:
        while not log.caught_up:
            yield from log.step()
        yield from log.flush()
    finally:
        log.close()
