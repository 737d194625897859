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
itself is never written). Either way the read is one transaction, and the member must
be stopped: a running one keeps compacting its log.
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


def _connect(data_dir: str | os.PathLike[str]) -> sqlite3.Connection:
    path = Path(data_dir) / DB_NAME
    if not path.is_file():
        raise DataDirError(f"{path}: no such file (is {data_dir} a member's --data-dir?)")
    try:
        wal = path.with_name(path.name + "-wal").exists()
        flags = "mode=ro" if wal else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?{flags}", uri=True)
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


def read_rows(data_dir: str | os.PathLike[str], after_index: int = 0) -> Iterator[Row]:
    """History rows of every committed entry the member retains, from its snapshot on;
    `after_index` skips entries already exported (they are still replayed)."""
    conn = _connect(data_dir)
    try:
        conn.execute("BEGIN")  # one consistent read of snapshot and log
        meta = _info(conn)
        replayer = Replayer()
        replayer.machine.start_at(initial_revision(meta.log_version))  # where its log began
        snap = conn.execute("SELECT idx, data FROM snapshot WHERE id = 1").fetchone()
        if snap is not None:
            try:
                replayer.restore(snap[0], snap[1])
            except ValueError as exc:
                raise DataDirError(f"{data_dir}: snapshot at index {snap[0]}: {exc}") from None
        cursor = conn.execute(
            "SELECT idx, term, type, data FROM log WHERE idx > ? AND idx <= ? ORDER BY idx",
            (meta.snapshot_index, meta.commit_index))
        for index, term, entry_type, data in cursor:
            rows, _ = replayer.apply(index, term, entry_type, data)
            if index > after_index:
                yield from rows
        yield from (r for r in replayer.flush() if r["index"] > after_index)
    except sqlite3.Error as exc:
        raise DataDirError(f"{data_dir}: {exc}") from None
    finally:
        conn.close()
