"""The `coord-fenced` PySpark data source (Spark 4's `pyspark.sql.datasource` API).

Batch: `writer()` runs on the driver (checks the options, prepares the sink, and decides
whether this job version is already published: then every task and the commit do
nothing); `write()` runs once per task attempt on an executor (`write_partition`: claim
the partition in coord, send each Arrow batch to the sink under the attempt's token with
sequences 0, 1, ..., seal); `commit()` on the driver publishes the winners coord still
names current and records the version; `abort()` discards and lets go.
Streaming: the same per task; `commit(messages, batchId)` publishes with the micro-batch
id as the version, so a micro-batch replayed after a restart publishes nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

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

from coord.client import CoordError
from coord.client.recipes.fence import Token
from coord.spark.attempt import LostClaimError, claim, client_for, is_current
from coord.spark.jobs import committed_version, record_version
from coord.spark.options import FORMAT, WriteOptions, parse_options
from coord.spark.reader import CommittedParquetReader, committed_schema
from coord.spark.sinks import PublishError, SqliteSink, open_sink

__all__ = ["FencedDataSource", "PartitionResult", "prepare_sink", "publish", "write_partition"]

log = logging.getLogger("coord.spark")


@dataclass(frozen=True)
class PartitionResult(WriterCommitMessage):
    """What a finished attempt tells the driver."""

    partition: int
    session_id: int = 0
    token: Token | None = None
    rows: int = 0
    skipped: bool = False  # the version was already published: nothing was written


def prepare_sink(opts: WriteOptions, schema: pa.Schema) -> None:
    """Create the sink's tables for `schema` if missing (the driver does, once per job)."""
    sink = open_sink(opts.sink)
    try:
        if isinstance(sink, SqliteSink):
            sink.prepare(schema, plain=not opts.fence)
    finally:
        sink.close()


def write_partition(opts: WriteOptions, partition: int,
                    batches: Iterator[pa.RecordBatch]) -> PartitionResult:
    """One task attempt's whole write, fenced (see the module docstring)."""
    sink = open_sink(opts.sink)
    try:
        if not opts.fence:
            rows = 0
            for batch in batches:
                if batch.num_rows:
                    sink.append_plain(batch)
                    rows += batch.num_rows
            return PartitionResult(partition, rows=rows)
        client = client_for(opts.endpoints, opts.tls)
        session, attempt = claim(client, opts.job, partition, opts.ttl)
        try:
            sink.begin(opts.job, partition, attempt.token)
            seq, rows = 1, 0
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                sink.append(opts.job, partition, attempt.token, seq, batch)
                seq += 1
                rows += batch.num_rows
            sink.seal(opts.job, partition, attempt.token, seq, rows)
            # Spark commits the first attempt to finish: one that coord no longer names
            # (a speculative copy took the partition over meanwhile) must fail here, or
            # the driver would find it stale and publish nothing.
            if not is_current(client, opts.job, partition, attempt.token):
                raise LostClaimError(f"{opts.job!r} partition {partition}: taken over "
                                     f"by a later attempt before this one finished")
        except BaseException:
            session.close()
            raise
        # Keep the claim until the driver publishes (it closes the session) or the TTL.
        session.detach()
        return PartitionResult(partition, attempt.session_id, attempt.token, rows)
    finally:
        sink.close()


def _partition() -> int:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("coord-fenced: write() must run inside a Spark task")
    return context.partitionId()


def _results(messages: list[WriterCommitMessage | None]) -> list[PartitionResult]:
    return [m for m in messages if isinstance(m, PartitionResult)]


def _let_go(opts: WriteOptions, results: list[PartitionResult]) -> None:
    """End the winners' sessions (their claims are released at once); best effort — an
    unreachable session simply expires after its TTL."""
    client = client_for(opts.endpoints, opts.tls)
    for r in results:
        if r.session_id:
            try:
                client.close_session(r.session_id)
            except CoordError:
                pass


def publish(opts: WriteOptions, version: int, results: list[PartitionResult]) -> bool:
    """The driver's commit: every winner must still be coord's current attempt, then the
    sink publishes them and records `version` atomically, then coord records it.
    False if the version was already published (nothing changes)."""
    client = client_for(opts.endpoints, opts.tls)
    winners: dict[int, tuple[Token, int]] = {}
    for r in results:
        assert r.token is not None
        if not is_current(client, opts.job, r.partition, r.token):
            raise PublishError(f"{opts.job!r} partition {r.partition}: attempt {r.token} is "
                               f"no longer coord's current attempt; publishing nothing")
        winners[r.partition] = (r.token, r.rows)
    sink = open_sink(opts.sink)
    try:
        published = sink.publish(opts.job, version, winners)
    finally:
        sink.close()
    record_version(client, opts.job, version)
    _let_go(opts, results)
    return published


def _discard(opts: WriteOptions, results: list[PartitionResult]) -> None:
    sink = open_sink(opts.sink)
    try:
        sink.discard(opts.job, {r.partition: r.token for r in results if r.token})
    finally:
        sink.close()
    _let_go(opts, results)


class FencedBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, version: int, skip: bool) -> None:
        self.opts = opts
        self.version = version
        self.skip = skip

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        if self.skip:
            return PartitionResult(_partition(), skipped=True)
        return write_partition(self.opts, _partition(), iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip or not self.opts.fence:
            return
        if not publish(self.opts, self.version, _results(messages)):
            log.warning("coord-fenced: %s version %d was published meanwhile; nothing more",
                        self.opts.job, self.version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.fence and not self.skip:
            _discard(self.opts, _results(messages))


class FencedStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        return write_partition(self.opts, _partition(), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.fence and not publish(self.opts, batchId, _results(messages)):
            log.warning("coord-fenced: %s micro-batch %d was already published (a replay "
                        "after restart); nothing more", self.opts.job, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.fence:
            _discard(self.opts, _results(messages))


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
        client = client_for(opts.endpoints, opts.tls)
        in_coord = committed_version(client, opts.job)
        sink = open_sink(opts.sink)
        try:
            in_sink = sink.committed_version(opts.job)
        finally:
            sink.close()
        if in_sink is not None and (in_coord is None or in_sink > in_coord):
            record_version(client, opts.job, in_sink)  # a driver died between the two
        done = max(v for v in (in_coord, in_sink, -1) if v is not None)
        if opts.version is None:
            return FencedBatchWriter(opts, done + 1, skip=False)
        if opts.version <= done:
            log.warning("coord-fenced: %s version %d is already published (last: %d); "
                        "this run writes nothing", opts.job, opts.version, done)
            return FencedBatchWriter(opts, opts.version, skip=True)
        return FencedBatchWriter(opts, opts.version, skip=False)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FencedStreamWriter:
        opts = self._opts(schema)
        if opts.version is not None:
            raise ValueError("option version does not apply to streaming: the micro-batch "
                             "id is the version")
        return FencedStreamWriter(opts)

    def schema(self) -> StructType:
        return committed_schema(self.options)

    def reader(self, schema: StructType) -> CommittedParquetReader:
        return CommittedParquetReader(self.options)
