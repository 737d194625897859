"""A SQLite table as a fenced sink (the tables: `coord.spark.sinks.sql`).

One database file. BEGIN IMMEDIATE takes the file's write lock, so concurrent executors
serialize on it and every transaction sees the fence as the last one left it.

The rows table has no index on the attempt (maintaining one nearly doubled the cost of
inserting a row). Its key `_coord_row` is the rowid (so VACUUM keeps it), which an
insert assigns as the largest + 1: under the write lock a batch's rows get consecutive
keys, each batch above every row the attempt stored before. The attempt's row in
`t__attempts` keeps the span of keys its batches took (`first_row`..`last_row`), and
deleting a losing attempt's rows reads only that span (rows of other attempts written
meanwhile inside it are skipped by their attempt id).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from coord.spark.sinks.sql import SqlSink

__all__ = ["SqliteSink"]

BUSY_TIMEOUT_S = 60.0


class SqliteSink(SqlSink):
    BEGIN = "BEGIN IMMEDIATE"
    DATABASE = "SQLite"
    TYPES = {"boolean": "INTEGER", "integer": "INTEGER", "float": "REAL", "string": "TEXT",
             "binary": "BLOB"}
    MISSING_TABLE = (sqlite3.OperationalError,)
    ROWS_KEY = ", _coord_row INTEGER PRIMARY KEY"  # the rowid, named: VACUUM keeps it

    def __init__(self, path: str, table: str) -> None:
        super().__init__(table)
        self.path = path
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")

    def _stored(self, attempt: int, rows: int) -> None:
        self._execute(f"UPDATE {self._t('__attempts')} SET first_row = coalesce(first_row, "
                      f"last_insert_rowid() - ? + 1), last_row = last_insert_rowid() "
                      f"WHERE id = ?", (rows, attempt))

    def _delete_rows(self, attempts: list[int]) -> None:
        self._executemany(
            f"DELETE FROM {self._t('__rows')} WHERE _coord_row BETWEEN (SELECT first_row FROM "
            f"{self._t('__attempts')} WHERE id = ?1) AND (SELECT last_row FROM "
            f"{self._t('__attempts')} WHERE id = ?1) AND _coord_attempt = ?1",
            [(a,) for a in attempts])

    def _execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, args)

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def close(self) -> None:
        self._db.close()
