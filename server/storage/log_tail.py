"""Where a member's stored log starts and ends (`LogTail`): what every write to it is
checked against (no gap, no older snapshot, terms never going back). `log_store` is its
file's only writer, so it keeps this in memory from write to write rather than read it
back in every one, and reads it here from the file only when it does not know it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogTail:
    """Where the stored log starts and ends (a lone append checked against it in memory
    is BEGIN, INSERT, COMMIT)."""

    snap_index: int  # 0: no snapshot
    snap_term: int
    last_index: int  # the last entry's, or the snapshot's when the log is empty
    last_term: int


def read_tail(conn: sqlite3.Connection) -> LogTail:
    """The log's ends as the file has them."""
    row = conn.execute("SELECT idx, term FROM snapshot WHERE id = 1").fetchone()
    snap_index, snap_term = (0, 0) if row is None else (int(row[0]), int(row[1]))
    row = conn.execute("SELECT idx, term FROM log ORDER BY idx DESC LIMIT 1").fetchone()
    if row is None or row[0] <= snap_index:
        return LogTail(snap_index, snap_term, snap_index, snap_term)
    return LogTail(snap_index, snap_term, int(row[0]), int(row[1]))


def term_at(conn: sqlite3.Connection, tail: LogTail, index: int) -> int | None:
    """Term of the entry at ``index`` from the log or the snapshot; None if unknown."""
    if index == tail.last_index:
        return tail.last_term
    if index == tail.snap_index:
        return tail.snap_term
    if not tail.snap_index < index < tail.last_index:
        return None
    row = conn.execute("SELECT term FROM log WHERE idx = ?", (index,)).fetchone()
    return None if row is None else int(row[0])
