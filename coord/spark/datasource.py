"""The `coord-fenced` PySpark data source (Spark 4's `pyspark.sql.datasource` API).

Batch: `writer()` runs on the driver: it checks the options, prepares the sink, decides
whether the job version (option `version`, required) is already published — then every
task and the commit do nothing — and otherwise starts a run (`begin_run`), which fences
every older run of the job. `write()` runs once per task attempt on an executor
(`write_partition`: check the run, claim the partition in coord, send each Arrow batch
to the sink under the attempt's token with sequences 0, 1, ..., seal; a later copy of a
partition an attempt of this run has sealed writes nothing and names that attempt).
`commit()` on the driver publishes the attempts Spark committed and records the version,
checking inside the sink's publish that the run is still the newest; `abort()` discards
and lets go. A run that cannot publish its rows — fenced by a newer run, or a higher
version published meanwhile — raises; it never reports success for rows it dropped.
Streaming: the same per task, under the key `<job>.<query id>` with the micro-batch id
as the version (Delta's txnAppId/txnVersion): a micro-batch replayed after a restart
publishes nothing twice, and a reset checkpoint (a new query id) counts afresh instead
of being taken for a replay.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from coord.client import Client, CoordError, KeyValue
from coord.client.recipes.fence import Token
from coord.spark.attempt import check_run, claim, client_for, start_run
from coord.spark.jobs import record_version, version_record
from coord.spark.options import FORMAT, WriteOptions, parse_options
from coord.spark.overlap import started
from coord.spark.reader import CommittedParquetReader, committed_schema
from coord.spark.sinks import PublishError, Sink, SqlSink, open_sink

__all__ = ["FencedDataSource", "PartitionResult", "begin_run", "prepare_sink", "publish",
           "write_partition"]

log = logging.getLogger("coord.spark")

VERSION_REQUIRED = (
    "option version is required for a batch write: the job version this run publishes "
    "(a date, a sequence number of its input). A version at or below the last one "
    "published is a no-op, so a re-run never appends the same data twice; coord cannot "
    "tell a re-run from new data without it")
MAX_STREAM_JOB = 128 - 37  # stream_key adds '.' and the 36-character query id


@dataclass(frozen=True)
class PartitionResult(WriterCommitMessage):
    """What a finished attempt tells the driver: the attempt to publish for its
    partition (its own, or the earlier attempt that had sealed it) and the job key it
    wrote under."""

    partition: int
    session_id: int = 0  # the attempt's session, 0 if it has none to end
    token: Token | None = None
    rows: int = 0
    skipped: bool = False  # the version was already published: nothing was written
    key: str = ""


def begin_run(client: Client, job: str, sink: Sink) -> int:
    """A new run of `job` (`attempt.start_run`), started under the sink's
    `starting_run` lock: an older run's publish into `sink` comes wholly before it or
    checks after it (and fails), so no publish of a superseded run can land. A job's
    runs are fenced this way within the one sink they write."""
    with sink.starting_run():
        return start_run(client, job)


def prepare_sink(opts: WriteOptions, schema: pa.Schema) -> None:
    """Create the sink's tables for `schema` if missing (the driver does, once per job)."""
    sink = open_sink(opts.sink)
    try:
        if isinstance(sink, SqlSink):
            sink.prepare(schema, plain=not opts.fence)
    finally:
        sink.close()


def _write_plain(sink: Sink, partition: int,
                 batches: Iterator[pa.RecordBatch]) -> PartitionResult:
    rows = 0
    for batch in batches:
        if batch.num_rows:
            sink.append_plain(batch)
            rows += batch.num_rows
    return PartitionResult(partition, rows=rows)


def write_partition(opts: WriteOptions, partition: int, batches: Iterator[pa.RecordBatch],
                    run: int = 0, version: int = 0, key: str = "") -> PartitionResult:
    """One task attempt's whole write of `version` for `run`, fenced (see the module
    docstring), under the job key `key` (default: the job)."""
    sink = open_sink(opts.sink)
    try:
        if not opts.fence:
            return _write_plain(sink, partition, batches)
        key = key or opts.job
        client = client_for(opts.endpoints, opts.tls)
        session, attempt = claim(client, key, partition, opts.ttl, run, version,
                                 run_job=opts.job)
        try:
            sealed = sink.begin(key, partition, attempt.token)
            if sealed is not None:  # an earlier attempt of this run sealed it: it wins
                session.close()
                return PartitionResult(partition, 0, sealed.token, sealed.rows, key=key)
            seq, rows = 1, 0
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                sink.append(key, partition, attempt.token, seq, batch)
                seq += 1
                rows += batch.num_rows
            sink.seal(key, partition, attempt.token, seq, rows)
        except BaseException:
            session.close()
            raise
        # Keep the claim until the driver publishes (it closes the session) or the TTL.
        session.detach()
        return PartitionResult(partition, attempt.session_id, attempt.token, rows, key=key)
    finally:
        sink.close()


def _context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("coord-fenced: write() must run inside a Spark task")
    return context


def _results(messages: list[WriterCommitMessage | None]) -> list[PartitionResult]:
    return [m for m in messages if isinstance(m, PartitionResult)]


def _let_go(opts: WriteOptions, results: list[PartitionResult]) -> None:
    """End the winners' sessions (their claims are released at once), all in one round
    trip; best effort — a session not ended simply expires after its TTL."""
    sessions = [r.session_id for r in results if r.session_id]
    if sessions:
        try:
            client_for(opts.endpoints, opts.tls).close_sessions(sessions)
        except CoordError:  # the client could not be reached at all
            pass


PAUSE_AFTER_PUBLISH = "COORD_SPARK_PAUSE_AFTER_PUBLISH"


def _pause_point() -> None:
    """A fault test's hold point between the sink's publish and coord's record (the
    window jobs.py's catch-up exists for; tests/spark/test_driver_kill.py): with
    $COORD_SPARK_PAUSE_AFTER_PUBLISH naming a file, the process running the commit
    writes its pid there and stops itself (SIGSTOP), for the test to kill the driver
    exactly there. Unset, as everywhere else, it does nothing."""
    marker = os.environ.get(PAUSE_AFTER_PUBLISH)
    if marker:
        Path(f"{marker}.tmp").write_text(str(os.getpid()))
        os.replace(f"{marker}.tmp", marker)  # whole, once it exists
        os.kill(os.getpid(), signal.SIGSTOP)


def publish(opts: WriteOptions, key: str, run: int, version: int,
            results: list[PartitionResult], seen: KeyValue | None = None) -> int | None:
    """The driver's commit: the sink publishes the attempts Spark committed and records
    `version` under `key` atomically if `run` is still the job's newest run, checked
    inside the publish (RunFencedError names the newer one), then coord records it
    (`seen`: its record as the driver last read it, see `record_version`) while the
    winners' sessions end: neither waits for the other, both only for the sink's
    publish. None if published; else the version the sink had already recorded
    (nothing changed)."""
    client = client_for(opts.endpoints, opts.tls)
    winners: dict[int, tuple[Token, int]] = {}
    for r in results:
        assert r.token is not None
        winners[r.partition] = (r.token, r.rows)
    sink = open_sink(opts.sink)
    try:
        # checked inside the publish, under the lock begin_run holds (Sink.starting_run)
        done = (None if sink.publish(key, version, winners,
                                     lambda: check_run(client, opts.job, run))
                else sink.committed_version(key))
    finally:
        sink.close()
    _pause_point()
    letting_go = started(lambda: _let_go(opts, results))
    record_version(client, key, version if done is None else done, seen)
    letting_go.result()
    return done


def _discard(opts: WriteOptions, key: str, results: list[PartitionResult]) -> None:
    sink = open_sink(opts.sink)
    try:
        sink.discard(key, {r.partition: r.token for r in results if r.token})
    finally:
        sink.close()
    _let_go(opts, results)


class FencedBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, version: int, skip: bool, run: int = 0,
                 seen: KeyValue | None = None) -> None:
        self.opts = opts
        self.version = version
        self.skip = skip
        self.run = run
        self.seen = seen  # coord's record of the job's version, as the driver read it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        partition = _context().partitionId()
        if self.skip:
            return PartitionResult(partition, skipped=True)
        return write_partition(self.opts, partition, iterator, self.run, self.version)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip or not self.opts.fence:
            return
        done = publish(self.opts, self.opts.job, self.run, self.version, _results(messages),
                       self.seen)
        if done is None:
            return
        if done != self.version:  # a higher version came first: these rows would be lost
            raise PublishError(f"{self.opts.job!r} version {self.version} was not "
                               f"published: version {done} was published meanwhile")
        log.warning("coord-fenced: %s version %d was published meanwhile by another run "
                    "of it; nothing more", self.opts.job, self.version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.fence and not self.skip:
            _discard(self.opts, self.opts.job, _results(messages))


QUERY_ID = "sql.streaming.queryId"  # Spark's local properties in a micro-batch's tasks
BATCH_ID = "streaming.sql.batchId"


def stream_key(job: str, query_id: str) -> str:
    """The job key of a streaming query's output: versions (micro-batch ids) are counted
    per query, as Delta's txnAppId is the query id, so a new checkpoint (a new query id)
    or another query under the same job name starts its own count."""
    return f"{job}.{query_id}"


class FencedStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, run: int) -> None:
        self.opts = opts
        self.run = run

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        context = _context()
        if not self.opts.fence:
            return write_partition(self.opts, context.partitionId(), iterator)
        query, batch = context.getLocalProperty(QUERY_ID), context.getLocalProperty(BATCH_ID)
        if not query or batch is None:
            raise RuntimeError(f"coord-fenced: a streaming task without Spark's {QUERY_ID} "
                               f"and {BATCH_ID}")
        return write_partition(self.opts, context.partitionId(), iterator, self.run,
                               int(batch), stream_key(self.opts.job, query))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = _results(messages)
        if not self.opts.fence or not results:
            return
        keys = {r.key for r in results}
        if len(keys) != 1:
            raise PublishError(f"{self.opts.job!r} micro-batch {batchId}: attempts of "
                               f"several queries {sorted(keys)}; publishing nothing")
        done = publish(self.opts, keys.pop(), self.run, batchId, results)
        if done is not None:
            log.info("coord-fenced: %s micro-batch %d was already published (a replay "
                     "after restart); nothing more", self.opts.job, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = _results(messages)
        if self.opts.fence and results:
            _discard(self.opts, results[0].key, results)


class FencedDataSource(DataSource):
    """`df.write.format("coord-fenced")`: see coord.spark; `spark.read.format(
    "coord-fenced")` reads a Parquet sink's committed rows (coord.spark.reader)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _opts(self, schema: StructType) -> WriteOptions:
        opts = parse_options(self.options)
        prepare_sink(opts, to_arrow_schema(schema))
        return opts

    def writer(self, schema: StructType, overwrite: bool) -> FencedBatchWriter:
        if overwrite:
            raise ValueError("coord-fenced appends: use mode('append') (a version is "
                             "published once; overwrite is not supported)")
        opts = self._opts(schema)
        if not opts.fence:
            return FencedBatchWriter(opts, 0, skip=False)
        if opts.version is None:
            raise ValueError(VERSION_REQUIRED)
        client = client_for(opts.endpoints, opts.tls)
        seen = version_record(client, opts.job)
        in_coord = None if seen is None else int(seen.value)
        sink = open_sink(opts.sink)
        try:
            in_sink = sink.committed_version(opts.job)
            if in_sink is not None and (in_coord is None or in_sink > in_coord):
                record_version(client, opts.job, in_sink, seen)  # a driver died between
                seen = None  # changed: the commit's record reads it again
            done = max(v for v in (in_coord, in_sink, -1) if v is not None)
            if opts.version <= done:
                log.warning("coord-fenced: %s version %d is already published (last: %d); "
                            "this run writes nothing", opts.job, opts.version, done)
                return FencedBatchWriter(opts, opts.version, skip=True)
            return FencedBatchWriter(opts, opts.version, skip=False,
                                     run=begin_run(client, opts.job, sink), seen=seen)
        finally:
            sink.close()

    def streamWriter(self, schema: StructType, overwrite: bool) -> FencedStreamWriter:
        opts = self._opts(schema)
        if opts.version is not None:
            raise ValueError("option version does not apply to streaming: the micro-batch "
                             "id is the version")
        if not opts.fence:
            return FencedStreamWriter(opts, 0)
        if len(opts.job) > MAX_STREAM_JOB:
            raise ValueError(f"option job: at most {MAX_STREAM_JOB} characters for a "
                             f"streaming query (its output key adds the query id)")
        sink = open_sink(opts.sink)
        try:
            return FencedStreamWriter(opts, begin_run(client_for(opts.endpoints, opts.tls),
                                                      opts.job, sink))
        finally:
            sink.close()

    def schema(self) -> StructType:
        return committed_schema(self.options)

    def reader(self, schema: StructType) -> CommittedParquetReader:
        return CommittedParquetReader(self.options)
