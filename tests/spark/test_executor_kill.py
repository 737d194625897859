"""An executor JVM killed (kill -9) while a task is mid-write, under real Spark with
executors of their own (local-cluster mode: tests/spark/executor_kill_job.py, a driver
process of its own) against a real 3-member coord cluster, into SQLite and into a real
PostgreSQL server. Spark loses the executor, retries the task on another one, and the
job succeeds; what each writer leaves in its table, 16,000 rows in 2 partitions,
partition 1's first attempt killed:

- coord-fenced: every row exactly once (partition 1 published from its retry);
- coord-fenced with fence=off: the 1,000 rows stored before the kill, twice;
- df.foreachPartition(insert_rows), chunks of 1,000 committed: its first chunk, twice;
- Spark's df.write.jdbc (a transaction per partition): the open transaction dies with
  the JVM (SQLite's, or the PostgreSQL backend's once its connection drops) and is
  rolled back: every row once — the fence adds nothing here;
- df.write.jdbc with isolationLevel=NONE (autocommit: each row its own transaction):
  the rows it had committed before the kill (the 1,000 the kill waited for, and any
  the JVM committed meanwhile), twice.

The unfenced writers' duplicates are the proof that the kill came mid-write: none there
fails the test. Each marker holds the killed JVM's pid, which must be gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coord.spark.sinks import SqlSink, open_sink
from tests.conftest import require_java
from tests.spark.executor_kill_job import (
    AFTER_ROWS,
    FAIL_PARTITION,
    HI,
    LO,
    ROWS,
    WRITERS,
    Target,
    targets,
)
from tests.spark.faults import TIMED_OUT

# slow (make test-slow): a driver and a local cluster of its own; the suite's
# test_spark_writer.py::test_a_task_killed_mid_write_is_written_once kills the task's
# Python worker and covers the same fence
pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request) -> list[str]:
    """The job's database argument: SQLite files under its work directory, or the run's
    PostgreSQL server (tests/conftest.py's `postgres`)."""
    if request.param == "sqlite":
        return ["sqlite"]
    server = request.getfixturevalue("postgres")
    return ["postgres", server.url, server.jdbc_url]


def open_table(target: Target) -> SqlSink:
    sink = open_sink(target.options)
    assert isinstance(sink, SqlSink)
    return sink


def table_ids(target: Target) -> list[int]:
    """The ids a reader of the writer's table sees (the fenced sink's committed view)."""
    sink = open_table(target)
    try:
        rows = sink.read()
        return sorted(rows.column("id").to_pylist()) if rows.num_rows else []
    finally:
        sink.close()


def twice(ids: list[int]) -> list[int]:
    seen: set[int] = set()
    return sorted(i for i in ids if i in seen or seen.add(i))


def test_an_executor_jvm_killed_mid_write_fenced_vs_plain_foreach_and_jdbc(
        coord3, database, tmp_path):
    require_java()
    import pyspark

    env = dict(os.environ, SPARK_HOME=str(Path(pyspark.__file__).parent))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.executor_kill_job", ",".join(coord3.endpoints),
         str(tmp_path), *database],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    for writer in WRITERS:
        timed_out = tmp_path / writer / TIMED_OUT
        assert not timed_out.exists(), f"{writer}: {timed_out.read_text()}"
    assert proc.returncode == 0, proc.stderr[-4000:]
    for writer in WRITERS:  # each attempt really killed its executor JVM
        marker = tmp_path / writer / f"failed-{FAIL_PARTITION}"
        assert marker.exists(), f"{writer}: the fault never fired"
        assert not Path(f"/proc/{int(marker.read_text())}").exists(), f"{writer}: JVM alive"
    to = targets(tmp_path, database)
    got = {w: table_ids(to[w]) for w in WRITERS}
    print(f"\n{database[0]}, executor JVM killed mid-write (partition {FAIL_PARTITION}, "
          f"{ROWS} rows in 2 partitions), task retried: " + "; ".join(
              f"{w} {len(ids)} rows ({len(twice(ids))} duplicates, "
              f"{ROWS - len(set(ids))} lost)" for w, ids in got.items()))
    assert got["fenced"] == list(range(ROWS))
    assert got["jdbc"] == list(range(ROWS))  # its transaction died with the JVM
    for writer in ("plain", "foreach"):  # the rows stored before the kill stayed
        assert twice(got[writer]) == list(range(LO, LO + AFTER_ROWS)), writer
        assert set(got[writer]) == set(range(ROWS)), writer
    # autocommit: each statement its own transaction (SQLite's a row, pgjdbc's a JDBC
    # batch), committed in order; the kill came once the first AFTER_ROWS were visible,
    # and the JVM may have committed a few more
    dup = twice(got["jdbc_none"])
    assert len(dup) >= AFTER_ROWS and dup == list(range(LO, LO + len(dup))), dup[:3]
    assert LO + len(dup) < HI and set(got["jdbc_none"]) == set(range(ROWS))
    sink = open_table(to["fenced"])
    try:  # partition 1 was published from its retry (a producer epoch above 0)
        epochs = dict(sink._execute(f"SELECT partition, epoch FROM {to['fenced'].table}"
                                    "__attempts WHERE published_version = 1").fetchall())
    finally:
        sink.close()
    assert epochs[FAIL_PARTITION] >= 1 and set(epochs) == {0, 1}
