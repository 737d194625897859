"""Faults planted inside real Spark write tasks, for tests/spark/test_spark_writer.py.

`FaultySource` is the `coord-fenced` data source whose task attempt 0 of one partition
raises after it has sent some rows (option `fail_partition`, `fail_after_rows`), or with
option `fail_by=kill` kill -9s its own Python worker: a task killed mid-write, in the
writer's own Python worker (each batch is stored before the next is asked for, so the
rows before the fault are in the sink). `zombie_main` is a task attempt of
the writer run outside Spark (`python -m tests.spark.faults ...`): it claims a partition,
sends half its rows, stops itself (SIGSTOP) and, once continued, sends the rest.
`SlowFirstSource` makes attempt 0 of one partition a straggler for speculation, by a
handshake through marker files rather than by timing: attempt 0 stores half its rows
and says so; the speculative copy waits for that before it claims the partition, stores
its first batch and says so; only then does attempt 0 send the rest. However slow either
attempt starts, the straggler's first half is stored before the takeover and its next
write comes after it. With option `straggle=sealed` the straggler instead seals the
partition and says so; the copy starts only then, and the straggler returns only after
the copy has either finished (it found the partition sealed) or stored its first batch.
A wait that times out fails the task and leaves its reason in the markers directory.
`HeldSource` holds every task before it writes until the test releases it: a run
planned, then overtaken by a newer run of the same job. `failing_upstream` plants the
same killed-task fault for a writer that runs in the JVM (Spark's own `df.write.jdbc`):
attempt 0 of one partition feeds its writer some rows, then fails. (A Python writer
downstream of it runs in another Python worker, which may not have stored those rows
when the task fails: coord-fenced gets the fault inside its own worker, FaultySource.)
The test registers this module to be pickled by value, so Spark's workers need not
import the test tree.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext

from coord.client.recipes.fence import FencedWriteError
from coord.spark.datasource import FencedBatchWriter, FencedDataSource, PartitionResult
from coord.spark.options import parse_options


def fail_midway(batches: Iterator[pa.RecordBatch], after_rows: int,
                marker: Path | None = None, kill: bool = False) -> Iterator[pa.RecordBatch]:
    """The batches until `after_rows` rows are sent, then (having touched `marker`) an
    error, or with `kill` a kill -9 of this process (the task's Python worker)."""
    sent = 0
    for batch in batches:
        yield batch
        sent += batch.num_rows
        if sent >= after_rows:
            if marker is not None:
                marker.touch()
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"planted failure after {sent} rows")


class FaultyWriter(FencedBatchWriter):
    def __init__(self, base: FencedBatchWriter, partition: int, after_rows: int,
                 markers: Path | None = None, kill: bool = False) -> None:
        super().__init__(base.opts, base.version, base.skip, base.run)
        self.fail_partition = partition
        self.after_rows = after_rows
        self.markers = markers
        self.kill = kill

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == self.fail_partition and context.attemptNumber() == 0:
            marker = self.markers / f"failed-{self.fail_partition}" if self.markers else None
            iterator = fail_midway(iterator, self.after_rows, marker, self.kill)
        return super().write(iterator)


class FaultySource(FencedDataSource):
    @classmethod
    def name(cls) -> str:
        return "coord-fenced-faulty"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        base = super().writer(schema, overwrite)
        markers = self.options.get("markers")
        return FaultyWriter(base, int(self.options["fail_partition"]),
                            int(self.options["fail_after_rows"]),
                            Path(markers) if markers else None,
                            self.options.get("fail_by") == "kill")


HANDSHAKE_WAIT_S = 90  # the longest either attempt waits for the other's step
HALF_STORED = "straggler-half-stored"  # marker files in the `markers` directory
COPY_STORED = "copy-first-stored"
SEALED = "straggler-sealed"
STRAGGLER_DONE = "straggler-done"
HELD = "held"
RELEASED = "released"
TIMED_OUT = "timed-out"


def await_marker(markers: Path, name: str) -> None:
    """Wait until the other attempt has created `markers/name` (await_condition)."""
    await_condition(markers, name, (markers / name).exists)


def await_condition(markers: Path, what: str, holds: Callable[[], bool]) -> None:
    """Wait until `holds()`. Past HANDSHAKE_WAIT_S (or once any wait of this write has
    timed out) write the reason to `markers/TIMED_OUT`, which the test reports, and fail
    the task."""
    deadline = time.monotonic() + HANDSHAKE_WAIT_S
    while not holds():
        if (markers / TIMED_OUT).exists():
            raise RuntimeError(f"an earlier handshake wait timed out; not waiting for {what}")
        if time.monotonic() > deadline:
            reason = f"{what} did not happen within {HANDSHAKE_WAIT_S} s"
            (markers / TIMED_OUT).write_text(reason)
            raise RuntimeError(reason)
        time.sleep(0.05)


def straggle(batches: Iterator[pa.RecordBatch], after_rows: int,
             markers: Path) -> Iterator[pa.RecordBatch]:
    """Attempt 0: send `after_rows` rows, say they are stored (the consumer stores each
    batch before it asks for the next), wait until the copy has stored its first batch,
    send the rest."""
    sent = 0
    for batch in batches:
        yield batch
        sent += batch.num_rows
        if sent >= after_rows:
            break
    (markers / HALF_STORED).touch()
    await_marker(markers, COPY_STORED)
    yield from batches


def announce_first(batches: Iterator[pa.RecordBatch], markers: Path) -> Iterator[pa.RecordBatch]:
    """A later attempt: the marker appears once its first batch is stored (asked for
    after the attempt's claim and its begin in the sink)."""
    first = next(batches, None)
    if first is not None:
        yield first
    (markers / COPY_STORED).touch()
    yield from batches


def announce_then_wait(batches: Iterator[pa.RecordBatch],
                       markers: Path) -> Iterator[pa.RecordBatch]:
    """A copy that took over a sealed partition (no first-committer rule): say its first
    batch is stored, then write the rest only once the straggler has returned."""
    first = next(batches, None)
    if first is not None:
        yield first
    (markers / COPY_STORED).touch()
    await_marker(markers, STRAGGLER_DONE)
    yield from batches


class SlowFirstWriter(FencedBatchWriter):
    def __init__(self, base: FencedBatchWriter, partition: int, after_rows: int,
                 markers: Path, sealed: bool) -> None:
        super().__init__(base.opts, base.version, base.skip, base.run)
        self.slow_partition = partition
        self.after_rows = after_rows
        self.markers = markers
        self.sealed = sealed

    def _write_sealed(self, attempt: int, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        if attempt == 0:
            result = super().write(iterator)
            (self.markers / SEALED).touch()
            await_marker(self.markers, COPY_STORED)
            (self.markers / STRAGGLER_DONE).touch()
            return result
        await_marker(self.markers, SEALED)
        result = super().write(announce_then_wait(iterator, self.markers))
        (self.markers / COPY_STORED).touch()
        return result

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == self.slow_partition and self.sealed:
            return self._write_sealed(context.attemptNumber(), iterator)
        if context.partitionId() == self.slow_partition:
            if context.attemptNumber() == 0:
                iterator = straggle(iterator, self.after_rows, self.markers)
            else:
                # Before its claim: taking the partition over earlier would fence the
                # straggler before it stored anything, and there would be nothing to show.
                await_marker(self.markers, HALF_STORED)
                iterator = announce_first(iterator, self.markers)
        return super().write(iterator)


class SlowFirstSource(FencedDataSource):
    @classmethod
    def name(cls) -> str:
        return "coord-fenced-slow-first"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        base = super().writer(schema, overwrite)
        return SlowFirstWriter(base, int(self.options["slow_partition"]),
                               int(self.options["slow_after_rows"]),
                               Path(self.options["markers"]),
                               self.options.get("straggle") == "sealed")


class HeldWriter(FencedBatchWriter):
    def __init__(self, base: FencedBatchWriter, markers: Path) -> None:
        super().__init__(base.opts, base.version, base.skip, base.run)
        self.markers = markers

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        (self.markers / HELD).touch()
        await_marker(self.markers, RELEASED)
        return super().write(iterator)


class HeldSource(FencedDataSource):
    @classmethod
    def name(cls) -> str:
        return "coord-fenced-held"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return HeldWriter(super().writer(schema, overwrite), Path(self.options["markers"]))


def failing_upstream(df, partition: int, after_rows: int, markers: Path):  # type: ignore[no-untyped-def]
    """`df` through a Python step (mapInArrow, in the write's own task) whose attempt 0
    of `partition` passes `after_rows` rows on to the writer, touches
    `markers/failed-<partition>` and raises. A JVM writer pulls each row from this step
    and the error comes after those rows in the worker's stream, so it has consumed
    them when its task fails and is retried."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() != partition or context.attemptNumber() != 0:
            yield from batches
            return
        yield from fail_midway(batches, after_rows, markers / f"failed-{partition}")

    return df.mapInArrow(step, df.schema)


def _batches(lo: int, hi: int, size: int, paused: Path) -> Iterator[pa.RecordBatch]:
    half = lo + (hi - lo) // 2
    for start in range(lo, hi, size):
        if start >= half and not paused.exists():
            paused.touch()
            os.kill(os.getpid(), signal.SIGSTOP)  # a GC pause, a frozen VM: until SIGCONT
        ids = list(range(start, min(start + size, hi)))
        yield pa.record_batch([pa.array(ids, pa.int64()), pa.array([str(i) for i in ids])],
                              names=["id", "s"])


def zombie_main(argv: list[str]) -> int:
    """argv: options-json partition lo hi batch-size paused-file. Prints a JSON line."""
    from coord.spark.attempt import client_for
    from coord.spark.datasource import begin_run, prepare_sink, write_partition
    from coord.spark.sinks import open_sink

    options, partition, lo, hi, size, paused = argv
    opts = parse_options(json.loads(options))
    prepare_sink(opts, pa.schema([("id", pa.int64()), ("s", pa.string())]))
    # its own run, as its driver would have started: the Spark job's run comes after
    run = 0
    if opts.fence:
        sink = open_sink(opts.sink)
        try:
            run = begin_run(client_for(opts.endpoints, opts.tls), opts.job, sink)
        finally:
            sink.close()
    result: dict[str, object] = {}
    try:
        r = write_partition(opts, int(partition), _batches(int(lo), int(hi), int(size),
                                                           Path(paused)), run)
        result = {"rows": r.rows}
    except FencedWriteError as e:
        result = {"refused": str(e.verdict), "sequence": e.sequence}
    print(json.dumps(result), flush=True)
    return 0



# Executor JVM kills (tests/spark/test_executor_kill.py, under local-cluster mode, where
# each executor is a JVM of its own and its Python workers are its descendants).
EXECUTOR_BACKEND = b"CoarseGrainedExecutorBackend"  # in an executor JVM's command line
FLUSH_BYTES = 65_536  # a Python worker's socket buffer (pyspark's SPARK_BUFFER_SIZE):
# a batch a Python step yields reaches the JVM only once this many bytes followed it


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def executor_jvm() -> int:
    """The pid of the executor JVM this Python worker belongs to: the nearest ancestor
    whose command line names Spark's executor backend (worker, pyspark daemon, JVM)."""
    pid = os.getppid()
    while pid > 1:
        if EXECUTOR_BACKEND in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = _parent(pid)
    raise RuntimeError("no executor JVM above this Python worker (in local mode the "
                       "executor is the driver's JVM: run under local-cluster)")


def kill_executor(marker: Path) -> None:
    """kill -9 this task's executor JVM, having written its pid to `marker`, then go
    with it: the pyspark daemon SIGHUPs its workers once the JVM's pipe closes. A worker
    still alive after HANDSHAKE_WAIT_S raises (its task is lost either way)."""
    jvm = executor_jvm()
    marker.write_text(str(jvm))
    os.kill(jvm, signal.SIGKILL)
    deadline = time.monotonic() + HANDSHAKE_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.05)
    raise RuntimeError(f"executor JVM {jvm} was killed; this worker outlived it")


def die_midway(items: Iterable, after_rows: int, marker: Path, by: str,
               rows: Callable[[object], int] = lambda batch: batch.num_rows) -> Iterator:
    """The items until `after_rows` rows are sent; then, once the consumer asks for the
    next one (a writer that stores each item before asking: the rows are stored), this
    task's process dies: by "worker" (kill -9 of this Python worker, `marker` touched)
    or "executor" (kill_executor). `rows`: the rows an item holds."""
    sent = 0
    for item in items:
        yield item
        sent += rows(item)
        if sent >= after_rows:
            if by == "executor":
                kill_executor(marker)
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)


def _first_attempt_of(partition: int) -> bool:
    context = TaskContext.get()
    assert context is not None
    return context.partitionId() == partition and context.attemptNumber() == 0


class ExecutorKillWriter(FencedBatchWriter):
    def __init__(self, base: FencedBatchWriter, partition: int, after_rows: int,
                 markers: Path) -> None:
        super().__init__(base.opts, base.version, base.skip, base.run)
        self.fail_partition = partition
        self.after_rows = after_rows
        self.markers = markers

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        if _first_attempt_of(self.fail_partition):
            iterator = die_midway(iterator, self.after_rows,
                                  self.markers / f"failed-{self.fail_partition}", "executor")
        return super().write(iterator)


class ExecutorKillSource(FencedDataSource):
    """coord-fenced whose attempt 0 of `fail_partition` kills its executor JVM after it
    stored `fail_after_rows` rows (marker: `markers`/failed-<partition>, the JVM's pid)."""

    @classmethod
    def name(cls) -> str:
        return "coord-fenced-executor-kill"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return ExecutorKillWriter(super().writer(schema, overwrite),
                                  int(self.options["fail_partition"]),
                                  int(self.options["fail_after_rows"]),
                                  Path(self.options["markers"]))


def dying_foreach(insert_rows: Callable[[Iterable], None], partition: int, after_rows: int,
                  markers: Path, by: str) -> Callable[[Iterable], None]:
    """`insert_rows` (a df.foreachPartition function) whose attempt 0 of `partition`
    dies (die_midway `by`) once it has taken `after_rows` rows and asks for the next."""

    def run(rows: Iterable) -> None:
        if _first_attempt_of(partition):
            rows = die_midway(rows, after_rows, markers / f"failed-{partition}", by,
                              rows=lambda _row: 1)
        insert_rows(rows)

    return run


def killing_upstream(df, partition: int, after_rows: int, markers: Path,  # type: ignore[no-untyped-def]
                     stored: Callable[[], bool]):
    """`df` through a Python step (mapInArrow) whose attempt 0 of `partition` kills its
    executor JVM while the JVM writer downstream (df.write.jdbc) is mid-write: once the
    step has passed `after_rows` rows and FLUSH_BYTES more (so those rows left its
    socket buffer and reached the writer), it waits until `stored()` — the database
    shows the writer has written them — then kill_executor (marker
    `markers`/failed-<partition>)."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if not _first_attempt_of(partition):
            yield from batches
            return
        sent = after = 0
        for batch in batches:
            yield batch
            if sent >= after_rows:
                after += batch.nbytes
            sent += batch.num_rows
            if after >= FLUSH_BYTES:
                await_condition(markers, "the JDBC writer storing rows", stored)
                kill_executor(markers / f"failed-{partition}")
        raise RuntimeError(f"partition {partition} ended before the executor was killed")

    return df.mapInArrow(step, df.schema)


if __name__ == "__main__":
    sys.exit(zombie_main(sys.argv[1:]))
