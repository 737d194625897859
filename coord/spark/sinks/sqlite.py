"""A SQLite table as a fenced sink.

One database file; for a target table `t`:
  - `t__rows`: the rows of every attempt, each tagged with its attempt id;
  - `t__attempts`: one row per attempt (job, partition, token) and the version that
    published it (NULL until then);
  - `t__fence`: the fence row per (job, partition): (generation, pid, epoch,
    last_sequence, sealed, rows, attempt, run, version);
  - `t__jobs`: the last published version per job (Delta's txnAppId/txnVersion);
  - `t__refusals`: every write the fence refused;
  - `t`: a view of the rows of published attempts: what readers see.
Each append judges the fence and stores rows + fence row in ONE transaction (BEGIN
IMMEDIATE, so concurrent executors serialize on the file lock); a refusal stores only
its log entry. Publishing flips the winners' attempts to visible, deletes the losers'
rows and records the version in one transaction.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path

import pyarrow as pa

from coord.client.recipes.fence import FencedWriteError, FenceRow, Token, judge, refused
from coord.client.recipes.sequence import ACCEPT
from coord.spark.sinks.base import Refusal, SealError, Sink, check_winner

__all__ = ["SqliteSink", "sqlite_type"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
BUSY_TIMEOUT_S = 60.0


def sqlite_type(dtype: pa.DataType) -> str:
    """The SQLite column type for an Arrow type; ValueError for one it cannot store."""
    if pa.types.is_boolean(dtype) or pa.types.is_integer(dtype):
        return "INTEGER"
    if pa.types.is_floating(dtype):
        return "REAL"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "TEXT"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "BLOB"
    raise ValueError(f"the SQLite sink cannot store {dtype} columns (supported: boolean, "
                     "integers, floats, strings, binary)")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqliteSink(Sink):
    def __init__(self, path: str, table: str) -> None:
        if not _NAME.match(table):
            raise ValueError(f"table must be a plain SQL name (letters, digits, _), "
                             f"got {table!r:.80}")
        self.path = path
        self.table = table
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")

    # -- schema -------------------------------------------------------------------------
    def _t(self, suffix: str = "") -> str:
        return _quote(self.table + suffix)

    def prepare(self, schema: pa.Schema, plain: bool = False) -> None:
        """Create the tables for `schema` if missing (the driver calls this once)."""
        cols = ", ".join(f"{_quote(f.name)} {sqlite_type(f.type)}" for f in schema)
        names = ", ".join(_quote(f.name) for f in schema)
        with self._txn():
            if plain:
                self._db.execute(f"CREATE TABLE IF NOT EXISTS {self._t()} ({cols})")
                return
            script = f"""
                CREATE TABLE IF NOT EXISTS {self._t('__rows')} ({cols}, _coord_attempt INTEGER);
                CREATE INDEX IF NOT EXISTS {self._t('__rows_attempt')}
                    ON {self._t('__rows')} (_coord_attempt);
                CREATE TABLE IF NOT EXISTS {self._t('__attempts')} (
                    id INTEGER PRIMARY KEY, job TEXT, partition INTEGER, generation INTEGER,
                    pid INTEGER, epoch INTEGER, published_version INTEGER);
                CREATE TABLE IF NOT EXISTS {self._t('__fence')} (
                    job TEXT, partition INTEGER, generation INTEGER, pid INTEGER,
                    epoch INTEGER, last_sequence INTEGER, sealed INTEGER, rows INTEGER,
                    attempt INTEGER, run INTEGER, version INTEGER,
                    PRIMARY KEY (job, partition));
                CREATE TABLE IF NOT EXISTS {self._t('__jobs')} (
                    job TEXT PRIMARY KEY, version INTEGER, published_ms INTEGER);
                CREATE TABLE IF NOT EXISTS {self._t('__refusals')} (
                    job TEXT, partition INTEGER, generation INTEGER, pid INTEGER,
                    epoch INTEGER, sequence INTEGER, verdict TEXT, at_ms INTEGER);
                CREATE VIEW IF NOT EXISTS {self._t()} AS SELECT {names}
                    FROM {self._t('__rows')} WHERE _coord_attempt IN
                    (SELECT id FROM {self._t('__attempts')}
                     WHERE published_version IS NOT NULL);
            """
            for statement in script.split(";"):  # executescript would commit early
                if statement.strip():
                    self._db.execute(statement)

    def _insert_sql(self, target: str, n: int, extra: int) -> str:
        return f"INSERT INTO {target} VALUES ({', '.join('?' * (n + extra))})"

    @contextmanager
    def _txn(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- the fence ----------------------------------------------------------------------
    def _fence_row(self, job: str, partition: int) -> tuple[FenceRow | None, int | None]:
        row = self._db.execute(
            f"SELECT generation, pid, epoch, last_sequence, sealed, rows, run, version, "
            f"attempt "
            f"FROM {self._t('__fence')} WHERE job = ? AND partition = ?",
            (job, partition)).fetchone()
        if row is None:
            return None, None
        return FenceRow(row[0], row[1], row[2], row[3], bool(row[4]), *row[5:8]), row[8]

    def fence(self, job: str, partition: int) -> FenceRow | None:
        try:
            return self._fence_row(job, partition)[0]
        except sqlite3.OperationalError:  # no tables yet: nothing was ever written
            return None

    def _admit(self, job: str, partition: int, token: Token,
               seq: int) -> tuple[int | None, FencedWriteError | None]:
        """Inside a transaction: judge the write. (attempt id to store under, None) if
        accepted; (None, None) for a duplicate; (None, error) for a refusal, which is
        logged in this transaction (the caller commits, then raises).
        PartitionSealedError for a later copy of a sealed partition (nothing to log)."""
        stored, attempt = self._fence_row(job, partition)
        verdict = judge(stored, token, seq)
        if refused(verdict):
            self._db.execute(
                f"INSERT INTO {self._t('__refusals')} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (job, partition, token.generation, token.pid, token.epoch, seq, str(verdict),
                 int(time.time() * 1000)))
            return None, FencedWriteError(verdict, job, partition, token, seq, stored)
        if verdict != ACCEPT:
            return None, None
        if seq == 0:  # a new attempt
            cur = self._db.execute(
                f"INSERT INTO {self._t('__attempts')} (job, partition, generation, pid, "
                f"epoch) VALUES (?, ?, ?, ?, ?)",
                (job, partition, token.generation, token.pid, token.epoch))
            attempt = cur.lastrowid
            self._db.execute(
                f"INSERT OR REPLACE INTO {self._t('__fence')} "
                f"VALUES (?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)",
                (job, partition, token.generation, token.pid, token.epoch, attempt,
                 token.run, token.version))
        else:
            self._db.execute(
                f"UPDATE {self._t('__fence')} SET last_sequence = ? "
                f"WHERE job = ? AND partition = ?", (seq, job, partition))
        return attempt, None

    def append(self, job: str, partition: int, token: Token, seq: int,
               batch: pa.RecordBatch) -> None:
        columns = [c.to_pylist() for c in batch.columns]
        with self._txn():
            attempt, error = self._admit(job, partition, token, seq)
            if attempt is not None and batch.num_rows:
                self._db.executemany(
                    self._insert_sql(self._t("__rows"), batch.num_columns, 1),
                    zip(*columns, repeat(attempt, batch.num_rows), strict=False))
                self._db.execute(
                    f"UPDATE {self._t('__fence')} SET rows = rows + ? WHERE job = ? AND "
                    f"partition = ?", (batch.num_rows, job, partition))
        if error is not None:
            raise error

    def seal(self, job: str, partition: int, token: Token, seq: int, rows: int) -> None:
        with self._txn():
            attempt, error = self._admit(job, partition, token, seq)
            if attempt is not None:
                stored = self.fence(job, partition)
                if stored is None or stored.rows != rows:
                    raise SealError(f"{job!r} partition {partition}: the attempt sent "
                                    f"{rows} rows, the sink stored "
                                    f"{stored.rows if stored else 0}")
                self._db.execute(f"UPDATE {self._t('__fence')} SET sealed = 1 "
                                 f"WHERE job = ? AND partition = ?", (job, partition))
        if error is not None:
            raise error

    # -- publishing ---------------------------------------------------------------------
    def committed_version(self, job: str) -> int | None:
        try:
            row = self._db.execute(f"SELECT version FROM {self._t('__jobs')} WHERE job = ?",
                                   (job,)).fetchone()
        except sqlite3.OperationalError:  # no tables yet: nothing was ever published
            return None
        return None if row is None else row[0]

    def publish(self, job: str, version: int, winners: dict[int, tuple[Token, int]]) -> bool:
        with self._txn():
            done = self.committed_version(job)
            if done is not None and version <= done:
                return False
            won: list[int] = []
            for partition, (token, rows) in sorted(winners.items()):
                stored, attempt = self._fence_row(job, partition)
                check_winner(job, partition, stored, token, rows)
                assert attempt is not None
                won.append(attempt)
            marks = ", ".join("?" * len(won))
            self._db.execute(f"UPDATE {self._t('__attempts')} SET published_version = ? "
                             f"WHERE id IN ({marks})", (version, *won))
            self._drop_unpublished(job, list(winners))
            self._db.execute(f"INSERT OR REPLACE INTO {self._t('__jobs')} VALUES (?, ?, ?)",
                             (job, version, int(time.time() * 1000)))
        return True

    def _drop_unpublished(self, job: str, partitions: list[int],
                          only: list[Token] | None = None) -> None:
        """Delete the rows of unpublished attempts of these partitions that no longer
        hold the fence (superseded), or, with `only`, of exactly those attempts. The
        attempt holding a fence row is kept: it may be another run's, still writing."""
        if not partitions:
            return
        marks = ", ".join("?" * len(partitions))
        losers = (f"SELECT a.id FROM {self._t('__attempts')} a WHERE a.job = ? AND "
                  f"a.published_version IS NULL AND a.partition IN ({marks})")
        args: tuple = (job, *partitions)
        if only is None:
            losers += (f" AND a.id NOT IN (SELECT attempt FROM {self._t('__fence')} "
                       f"WHERE job = ?)")
            args = (*args, job)
        else:
            losers += " AND (a.generation, a.pid, a.epoch) IN (VALUES " + ", ".join(
                "(?, ?, ?)" for _ in only) + ")"
            args = (*args, *(v for t in only for v in (t.generation, t.pid, t.epoch)))
        self._db.execute(f"DELETE FROM {self._t('__rows')} WHERE _coord_attempt IN ({losers})",
                         args)
        self._db.execute(f"DELETE FROM {self._t('__attempts')} WHERE id IN ({losers})", args)

    def discard(self, job: str, attempts: dict[int, Token]) -> None:
        if not attempts:
            return
        with self._txn():
            self._drop_unpublished(job, sorted(attempts), only=list(attempts.values()))

    def refusals(self, job: str | None = None) -> list[Refusal]:
        sql = (f"SELECT job, partition, generation, pid, epoch, sequence, verdict "
               f"FROM {self._t('__refusals')}")
        try:
            rows = (self._db.execute(sql + " WHERE job = ? ORDER BY rowid", (job,))
                    if job is not None else self._db.execute(sql + " ORDER BY rowid"))
            return [Refusal(r[0], r[1], Token(r[2], r[3], r[4]), r[5], r[6]) for r in rows]
        except sqlite3.OperationalError:
            return []

    # -- unfenced baseline and reading --------------------------------------------------
    def append_plain(self, batch: pa.RecordBatch) -> None:
        columns = [c.to_pylist() for c in batch.columns]
        with self._txn():
            self._db.executemany(self._insert_sql(self._t(), batch.num_columns, 0),
                                 zip(*columns, strict=False))

    def read(self) -> pa.Table:
        cur = self._db.execute(f"SELECT * FROM {self._t()}")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})

    def close(self) -> None:
        self._db.close()
