"""What a Spark user writes to a database without a JDBC writer:
`df.foreachPartition(insert_rows)`, each task inserting its rows over the database's own
Python driver, committing every CHUNK rows (one transaction per partition would hold a
write lock and its undo for the whole task; chunked commits are the usual shape).

The baseline beside Spark's `df.write.jdbc` in `coord bench spark` and in the Spark
fault tests (tests/spark): nothing fences a task attempt, so the rows a failed attempt
committed stay when Spark retries the task.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["CHUNK", "row_inserter"]

CHUNK = 1_000  # rows per INSERT batch and commit
BUSY_TIMEOUT_S = 60.0  # concurrent tasks wait for SQLite's write lock


def _connect(target: dict[str, str]) -> tuple[Any, str]:
    """A connection to `target` (sink options: sink sqlite + path, or postgres + url)
    and its INSERT statement's placeholder."""
    if target["sink"] == "sqlite":
        return sqlite3.connect(target["path"], timeout=BUSY_TIMEOUT_S), "?"
    if target["sink"] == "postgres":
        import psycopg

        return psycopg.connect(target["url"]), "%s"
    raise ValueError(f"foreachPartition baseline: no database driver for {target['sink']!r}")


def _chunks(rows: Iterable[Any], size: int) -> Iterator[list[tuple[int, str]]]:
    chunk: list[tuple[int, str]] = []
    for row in rows:
        chunk.append((row["id"], row["s"]))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def row_inserter(target: dict[str, str], table: str) -> Callable[[Iterable[Any]], None]:
    """The function a user hands `df.foreachPartition`: insert the partition's rows
    (columns id, s) into `table` of `target`, committing each CHUNK rows."""

    def insert_rows(rows: Iterable[Any]) -> None:
        db, mark = _connect(target)
        sql = f"INSERT INTO {table} (id, s) VALUES ({mark}, {mark})"
        try:
            for chunk in _chunks(rows, CHUNK):
                cur = db.cursor()
                cur.executemany(sql, chunk)
                cur.close()
                db.commit()
        finally:
            db.close()

    return insert_rows
