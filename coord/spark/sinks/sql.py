"""A table in a SQL database as a fenced sink: the logic SQLite and PostgreSQL share.

For a target table `t`:
  - `t__rows`: the rows of every attempt, each tagged with its attempt id;
  - `t__attempts`: one row per attempt (job, partition, token) and the version that
    published it (NULL until then), and where a dialect without an index on the rows'
    attempt finds them (`first_row`, `last_row`: SQLite's rowid span);
  - `t__fence`: the fence row per (job, partition): (generation, pid, epoch,
    last_sequence, sealed, rows, attempt, run, version, revision);
  - `t__jobs`: the last published version per job (Delta's txnAppId/txnVersion);
  - `t__refusals`: every write the fence refused, in order, with the fence row's token
    it was judged against (`held_*`: the newer holder and coord's revision of its grant);
  - `t__log`: every accepted append, seal and publish, in the order the sink accepted
    them (its id), with the token (coord's grant revision included), sequence and rows,
    and for a publish the driver's run check (`run_job`, `checked_revision`): what
    `coord audit --sink-log`
    checks (exported by `coord.spark.sinks.log.export_log`);
  - `t`: a view of the rows of published attempts: what readers see.
Each append judges the fence and stores rows + fence row in ONE transaction; a refusal
stores only its log entry. Publishing checks the driver's run, flips the winners'
attempts to visible, deletes the losers' rows and records the version in one
transaction, holding the run lock a driver starting a run holds (`starting_run`). The
dialects (`coord.spark.sinks.sqlite`, `coord.spark.sinks.postgres`) say how a
transaction is begun and serialized, which types the columns get, how rows are
inserted in bulk and how a losing attempt's rows are found without a B-tree index on
the attempt; the SQL here is what both accept (`?` placeholders, ON CONFLICT upserts,
RETURNING).
"""

from __future__ import annotations

import re
import time
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any

import pyarrow as pa

from coord.client.recipes.fence import FencedWriteError, FenceRow, Token, judge, refused
from coord.client.recipes.sequence import ACCEPT
from coord.spark.attempt import RunCheck
from coord.spark.sinks.base import (
    REFUSAL_COLUMNS,
    Refusal,
    RunGuard,
    SealError,
    Sink,
    check_winner,
)

__all__ = ["SqlSink", "check_table_name", "column_type", "quote"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_table_name(table: str) -> str:
    """`table` if it is a plain SQL name; ValueError otherwise (it is spliced into SQL)."""
    if not _NAME.match(table):
        raise ValueError(f"table must be a plain SQL name (letters, digits, _), "
                         f"got {table!r:.80}")
    return table


def column_type(dtype: pa.DataType, types: dict[str, str], database: str) -> str:
    """The column type `types` names for an Arrow type's kind (boolean, integer, float,
    string, binary); ValueError for a kind the database cannot store."""
    kinds = (("boolean", pa.types.is_boolean), ("integer", pa.types.is_integer),
             ("float", pa.types.is_floating), ("string", pa.types.is_string),
             ("string", pa.types.is_large_string), ("binary", pa.types.is_binary),
             ("binary", pa.types.is_large_binary))
    for kind, test in kinds:
        if test(dtype):
            return types[kind]
    raise ValueError(f"the {database} sink cannot store {dtype} columns (supported: "
                     "boolean, integers, floats, strings, binary)")


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqlSink(Sink):
    """The shared sink; a dialect subclass opens the connection and fills the hooks."""

    INT = "INTEGER"  # the integer type of the bookkeeping columns
    ID = "INTEGER PRIMARY KEY"  # an id the database assigns
    CREATE_VIEW = "CREATE VIEW IF NOT EXISTS"
    BEGIN = "BEGIN"
    MISSING_TABLE: tuple[type[Exception], ...] = ()  # raised by a query of no tables yet

    def __init__(self, table: str) -> None:
        self.table = check_table_name(table)

    # -- the dialect's hooks --------------------------------------------------------------
    @abstractmethod
    def _execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement written with `?` placeholders; the cursor."""

    DATABASE = "SQL"  # its name, in errors
    TYPES: dict[str, str] = {}  # column_type's: an Arrow type's kind -> the column type

    def _insert_rows(self, target: str, names: list[str], rows: Iterable[tuple]) -> None:
        """Insert many rows into `target`'s columns `names` (a dialect may bulk-load)."""
        marks = ", ".join("?" * len(names))
        self._executemany(f"INSERT INTO {target} ({', '.join(quote(n) for n in names)}) "
                          f"VALUES ({marks})", rows)

    @abstractmethod
    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """One statement (`?` placeholders) per row."""

    ROWS_KEY = ""  # more columns of `t__rows` (SQLite's key, for `_stored`)
    ROWS_INDEX = ""  # how `t__rows` is indexed by attempt id, if it is (`_delete_rows`)

    def _rows_table(self, cols: str) -> tuple[str, ...]:
        """The statements creating `t__rows`: the user's columns `cols` and the
        attempt's id, as the dialect keys and indexes it. A B-tree index on the attempt
        is most of what a fenced row would cost to insert over a plain one, so no
        dialect has one (PostgreSQL: BRIN; SQLite: rowid spans, `_stored`)."""
        table = (f"CREATE TABLE IF NOT EXISTS {self._t('__rows')} ({cols}, "
                 f"_coord_attempt {self.INT}{self.ROWS_KEY})")
        if not self.ROWS_INDEX:
            return (table,)
        return (table, f"CREATE INDEX IF NOT EXISTS {self._t('__rows_attempt')} ON "
                       f"{self._t('__rows')} {self.ROWS_INDEX}")

    def _stored(self, attempt: int, rows: int) -> None:
        """Inside the append's transaction, just after `rows` rows of `attempt` were
        inserted into `t__rows`: note where they are, for a dialect without the index."""

    def _delete_rows(self, attempts: list[int]) -> None:
        """Delete these attempts' rows from `t__rows` (by ROWS_INDEX)."""
        self._execute(f"DELETE FROM {self._t('__rows')} WHERE _coord_attempt IN "
                      f"({', '.join('?' * len(attempts))})", attempts)

    def _serialize(self, *key: object) -> None:
        """Inside a transaction: wait for every other transaction on `key` (the table, a
        job, or a job's partition) to end. A no-op where BEGIN already serializes all
        writers (SQLite's BEGIN IMMEDIATE)."""

    # -- schema -------------------------------------------------------------------------
    def _t(self, suffix: str = "") -> str:
        return quote(self.table + suffix)

    def prepare(self, schema: pa.Schema, plain: bool = False) -> None:
        """Create the tables for `schema` if missing (the driver calls this once)."""
        cols = ", ".join(f"{quote(f.name)} {column_type(f.type, self.TYPES, self.DATABASE)}"
                         for f in schema)
        names = ", ".join(quote(f.name) for f in schema)
        i = self.INT
        with self._txn():
            self._serialize(self.table)
            if plain:
                self._execute(f"CREATE TABLE IF NOT EXISTS {self._t()} ({cols})")
                return
            for statement in (
                *self._rows_table(cols),
                f"CREATE TABLE IF NOT EXISTS {self._t('__attempts')} (id {self.ID}, job TEXT, "
                f"partition {i}, generation {i}, pid {i}, epoch {i}, published_version {i}, "
                f"first_row {i}, last_row {i})",
                f"CREATE TABLE IF NOT EXISTS {self._t('__fence')} (job TEXT, partition {i}, "
                f"generation {i}, pid {i}, epoch {i}, last_sequence {i}, sealed {i}, "
                f"rows {i}, attempt {i}, run {i}, version {i}, revision {i}, "
                f"PRIMARY KEY (job, partition))",
                f"CREATE TABLE IF NOT EXISTS {self._t('__jobs')} (job TEXT PRIMARY KEY, "
                f"version {i}, published_ms {i})",
                f"CREATE TABLE IF NOT EXISTS {self._t('__refusals')} (id {self.ID}, "
                + ", ".join(f"{c} {'TEXT' if c in ('job', 'verdict') else i}"
                            for c in REFUSAL_COLUMNS) + ")",
                f"CREATE TABLE IF NOT EXISTS {self._t('__log')} (id {self.ID}, op TEXT, "
                f"job TEXT, partition {i}, generation {i}, revision {i}, pid {i}, "
                f"epoch {i}, run {i}, version {i}, sequence {i}, rows {i}, at_ms {i}, "
                f"run_job TEXT, checked_revision {i})",
                f"{self.CREATE_VIEW} {self._t()} AS SELECT {names} FROM {self._t('__rows')} "
                f"WHERE _coord_attempt IN (SELECT id FROM {self._t('__attempts')} "
                f"WHERE published_version IS NOT NULL)",
            ):
                self._execute(statement)

    @contextmanager
    def _txn(self) -> Iterator[None]:
        self._execute(self.BEGIN)
        try:
            yield
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")

    # -- the fence ----------------------------------------------------------------------
    def _fence_row(self, job: str, partition: int) -> tuple[FenceRow | None, int | None]:
        row = self._execute(
            f"SELECT generation, pid, epoch, last_sequence, sealed, rows, run, version, "
            f"revision, attempt FROM {self._t('__fence')} WHERE job = ? AND partition = ?",
            (job, partition)).fetchone()
        if row is None:
            return None, None
        return FenceRow(row[0], row[1], row[2], row[3], bool(row[4]), *row[5:9]), row[9]

    def fence(self, job: str, partition: int) -> FenceRow | None:
        try:
            return self._fence_row(job, partition)[0]
        except self.MISSING_TABLE:  # nothing was ever written
            return None

    def _admit(self, job: str, partition: int, token: Token,
               seq: int) -> tuple[int | None, FencedWriteError | None]:
        """Inside a transaction: judge the write. (attempt id to store under, None) if
        accepted; (None, None) for a duplicate; (None, error) for a refusal, which is
        logged in this transaction (the caller commits, then raises).
        PartitionSealedError for a later copy of a sealed partition (nothing to log)."""
        self._serialize(self.table, job, partition)
        stored, attempt = self._fence_row(job, partition)
        verdict = judge(stored, token, seq)
        if refused(verdict):
            row = Refusal(job, partition, token, seq, str(verdict),
                          stored and stored.token).as_row(int(time.time() * 1000))
            self._execute(
                f"INSERT INTO {self._t('__refusals')} ({', '.join(REFUSAL_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(REFUSAL_COLUMNS))})",
                [row[c] for c in REFUSAL_COLUMNS])
            return None, FencedWriteError(verdict, job, partition, token, seq, stored)
        if verdict != ACCEPT:
            return None, None
        if seq == 0:  # a new attempt
            attempt = self._execute(
                f"INSERT INTO {self._t('__attempts')} (job, partition, generation, pid, "
                f"epoch) VALUES (?, ?, ?, ?, ?) RETURNING id",
                (job, partition, token.generation, token.pid, token.epoch)).fetchone()[0]
            self._execute(
                f"INSERT INTO {self._t('__fence')} VALUES (?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?) "
                f"ON CONFLICT (job, partition) DO UPDATE SET generation = excluded.generation, "
                f"pid = excluded.pid, epoch = excluded.epoch, last_sequence = 0, sealed = 0, "
                f"rows = 0, attempt = excluded.attempt, run = excluded.run, "
                f"version = excluded.version, revision = excluded.revision",
                (job, partition, token.generation, token.pid, token.epoch, attempt,
                 token.run, token.version, token.revision))
        else:
            self._execute(f"UPDATE {self._t('__fence')} SET last_sequence = ? "
                          f"WHERE job = ? AND partition = ?", (seq, job, partition))
        return attempt, None

    def _log(self, op: str, job: str, partition: int, token: Token, seq: int | None,
             rows: int, checked: RunCheck | None = None) -> None:
        """Inside the transaction that makes it so: one accepted write in `t__log`."""
        self._execute(
            f"INSERT INTO {self._t('__log')} (op, job, partition, generation, revision, pid, "
            f"epoch, run, version, sequence, rows, at_ms, run_job, checked_revision) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (op, job, partition, token.generation, token.revision, token.pid, token.epoch,
             token.run, token.version, seq, rows, int(time.time() * 1000),
             checked and checked.job, checked and checked.revision))

    def append(self, job: str, partition: int, token: Token, seq: int,
               batch: pa.RecordBatch) -> None:
        with self._txn():
            attempt, error = self._admit(job, partition, token, seq)
            if attempt is not None:
                self._log("append", job, partition, token, seq, batch.num_rows)
            if attempt is not None and batch.num_rows:
                columns = [c.to_pylist() for c in batch.columns]
                self._insert_rows(self._t("__rows"), [*batch.schema.names, "_coord_attempt"],
                                  zip(*columns, repeat(attempt, batch.num_rows), strict=False))
                self._stored(attempt, batch.num_rows)
                self._execute(f"UPDATE {self._t('__fence')} SET rows = rows + ? "
                              f"WHERE job = ? AND partition = ?",
                              (batch.num_rows, job, partition))
        if error is not None:
            raise error

    def seal(self, job: str, partition: int, token: Token, seq: int, rows: int) -> None:
        with self._txn():
            attempt, error = self._admit(job, partition, token, seq)
            if attempt is not None:
                stored = self._fence_row(job, partition)[0]
                if stored is None or stored.rows != rows:
                    raise SealError(f"{job!r} partition {partition}: the attempt sent "
                                    f"{rows} rows, the sink stored "
                                    f"{stored.rows if stored else 0}")
                self._execute(f"UPDATE {self._t('__fence')} SET sealed = 1 "
                              f"WHERE job = ? AND partition = ?", (job, partition))
                self._log("seal", job, partition, token, seq, rows)
        if error is not None:
            raise error

    # -- publishing ---------------------------------------------------------------------
    def _committed(self, job: str) -> int | None:
        row = self._execute(f"SELECT version FROM {self._t('__jobs')} WHERE job = ?",
                            (job,)).fetchone()
        return None if row is None else row[0]

    def committed_version(self, job: str) -> int | None:
        try:
            return self._committed(job)
        except self.MISSING_TABLE:  # nothing was ever published
            return None

    def _serialize_job(self, job: str, partitions: Iterable[int]) -> None:
        """The job, then its partitions in order: what publish and discard change. An
        append holds one partition only, so the order cannot deadlock."""
        self._serialize(self.table, job)
        for partition in sorted(partitions):
            self._serialize(self.table, job, partition)

    RUNS = "runs"  # the `_serialize` key of starting_run's lock, beside the table's

    @contextmanager
    def starting_run(self) -> Iterator[None]:
        with self._txn():
            self._serialize(self.table, self.RUNS)
            yield

    def publish(self, job: str, version: int, winners: dict[int, tuple[Token, int]],
                check: RunGuard | None = None) -> bool:
        with self._txn():
            self._serialize(self.table, self.RUNS)  # before the job's: as starting_run
            checked = check() if check is not None else None
            self._serialize_job(job, winners)
            done = self._committed(job)
            if done is not None and version <= done:
                return False
            won: list[int] = []
            for partition, (token, rows) in sorted(winners.items()):
                stored, attempt = self._fence_row(job, partition)
                check_winner(job, partition, stored, token, rows)
                assert attempt is not None
                won.append(attempt)
                self._log("publish", job, partition, token, None, rows, checked)
            if won:
                self._execute(f"UPDATE {self._t('__attempts')} SET published_version = ? "
                              f"WHERE id IN ({', '.join('?' * len(won))})", (version, *won))
            self._drop_unpublished(job, list(winners))
            self._execute(f"INSERT INTO {self._t('__jobs')} VALUES (?, ?, ?) "
                          f"ON CONFLICT (job) DO UPDATE SET version = excluded.version, "
                          f"published_ms = excluded.published_ms",
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
        doomed = [row[0] for row in self._execute(losers, args).fetchall()]
        if not doomed:  # the usual publish: no attempt lost, nothing to look for
            return
        self._delete_rows(doomed)
        self._execute(f"DELETE FROM {self._t('__attempts')} WHERE id IN "
                      f"({', '.join('?' * len(doomed))})", doomed)

    def discard(self, job: str, attempts: dict[int, Token]) -> None:
        if not attempts:
            return
        with self._txn():
            self._serialize_job(job, attempts)
            self._drop_unpublished(job, sorted(attempts), only=list(attempts.values()))

    def refusals(self, job: str | None = None) -> list[Refusal]:
        sql = f"SELECT {', '.join(REFUSAL_COLUMNS)} FROM {self._t('__refusals')}"
        try:
            rows = (self._execute(sql + " WHERE job = ? ORDER BY id", (job,))
                    if job is not None else self._execute(sql + " ORDER BY id")).fetchall()
        except self.MISSING_TABLE:
            return []
        return [Refusal.of_row(dict(zip(REFUSAL_COLUMNS, r, strict=True))) for r in rows]

    def log(self) -> pa.Table:
        """The accepted-write log (`t__log`), in the sink's order; empty if none."""
        from coord.spark.sinks.log import LOG_SCHEMA

        try:
            rows = self._execute(f"SELECT {', '.join(LOG_SCHEMA.names)} FROM "
                                 f"{self._t('__log')} ORDER BY id").fetchall()
        except self.MISSING_TABLE:
            rows = []
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(LOG_SCHEMA.names)},
                        schema=LOG_SCHEMA)

    # -- unfenced baseline and reading --------------------------------------------------
    def append_plain(self, batch: pa.RecordBatch) -> None:
        columns = [c.to_pylist() for c in batch.columns]
        with self._txn():
            self._insert_rows(self._t(), batch.schema.names, zip(*columns, strict=False))

    def read(self) -> pa.Table:
        cur = self._execute(f"SELECT * FROM {self._t()}")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
