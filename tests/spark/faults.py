"""Faults planted inside real Spark write tasks, for tests/spark/test_spark_writer.py.

`FaultySource` is the `coord-fenced` data source whose task attempt 0 of one partition
raises after it has sent some rows (option `fail_partition`, `fail_after_rows`): a task
killed mid-write, in the writer's own Python worker. `zombie_main` is a task attempt of
the writer run outside Spark (`python -m tests.spark.faults ...`): it claims a partition,
sends half its rows, stops itself (SIGSTOP) and, once continued, sends the rest.
The test registers this module to be pickled by value, so Spark's workers need not
import the test tree.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext

from coord.spark.datasource import FencedBatchWriter, FencedDataSource, PartitionResult
from coord.spark.fence import FencedWriteError
from coord.spark.options import parse_options


def fail_midway(batches: Iterator[pa.RecordBatch], after_rows: int) -> Iterator[pa.RecordBatch]:
    sent = 0
    for batch in batches:
        yield batch
        sent += batch.num_rows
        if sent >= after_rows:
            raise RuntimeError(f"planted failure after {sent} rows")


class FaultyWriter(FencedBatchWriter):
    def __init__(self, base: FencedBatchWriter, partition: int, after_rows: int) -> None:
        super().__init__(base.opts, base.version, base.skip)
        self.fail_partition = partition
        self.after_rows = after_rows

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionResult:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == self.fail_partition and context.attemptNumber() == 0:
            iterator = fail_midway(iterator, self.after_rows)
        return super().write(iterator)


class FaultySource(FencedDataSource):
    @classmethod
    def name(cls) -> str:
        return "coord-fenced-faulty"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        base = super().writer(schema, overwrite)
        return FaultyWriter(base, int(self.options["fail_partition"]),
                            int(self.options["fail_after_rows"]))


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
    from coord.spark.datasource import prepare_sink, write_partition

    options, partition, lo, hi, size, paused = argv
    opts = parse_options(json.loads(options))
    prepare_sink(opts, pa.schema([("id", pa.int64()), ("s", pa.string())]))
    result: dict[str, object] = {}
    try:
        r = write_partition(opts, int(partition), _batches(int(lo), int(hi), int(size),
                                                           Path(paused)))
        result = {"rows": r.rows}
    except FencedWriteError as e:
        result = {"refused": str(e.verdict), "sequence": e.sequence}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(zombie_main(sys.argv[1:]))
