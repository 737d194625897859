"""A SQLite table as a fenced sink (the tables: `coord.spark.sinks.sql`).

One database file. BEGIN IMMEDIATE takes the file's write lock, so concurrent executors
serialize on it and every transaction sees the fence as the last one left it.
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

    def __init__(self, path: str, table: str) -> None:
        super().__init__(table)
        self.path = path
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")

    def _execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, args)

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def close(self) -> None:
        self._db.close()
