"""The baseline a Spark user writes when there is no JDBC writer for their database:
`df.foreachPartition(insert_rows)` (coord.bench.spark_foreach: chunks of 1,000 rows,
each committed), under the killed-task fault of tests/spark/test_jdbc_baseline.py —
the task's Python worker killed (kill -9) after its first 1,000 of 2,000 rows, the task
retried by Spark — into the same databases (SQLite, a real PostgreSQL). Nothing fences
the dead attempt: its committed chunk stays and the retry inserts the whole partition
again, 1,000 duplicates, where coord-fenced under the same fault (that module) has none.
No duplicates here fails the test: the fault was not injected."""

from __future__ import annotations

import uuid

import pytest

from coord.bench.spark_foreach import CHUNK, row_inserter
from tests.spark.faults import dying_foreach
from tests.spark.test_jdbc_baseline import (  # noqa: F401 (fixtures)
    AFTER_ROWS,
    FAIL_PARTITION,
    PARTS,
    SCHEMA,
    N,
    database,
    duplicates,
    jdbc_drivers,
    open_table,
    table_ids,
)

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.mark.slow
def test_foreach_partition_inserts_keep_a_killed_task_s_rows(spark, database, tmp_path):  # noqa: F811
    table = f"foreach_{uuid.uuid4().hex[:8]}"
    sink = open_table(database, table)
    try:  # the user's table exists
        sink.prepare(SCHEMA, plain=True)
    finally:
        sink.close()
    target = {k: v for k, v in database.items() if k in ("sink", "path", "url")}
    df = spark.range(0, N, numPartitions=PARTS).selectExpr("id", "cast(id as string) s")
    df.foreachPartition(dying_foreach(row_inserter(target, table), FAIL_PARTITION,
                                      AFTER_ROWS, tmp_path, "worker"))
    assert (tmp_path / f"failed-{FAIL_PARTITION}").exists(), "the fault never fired"
    got = table_ids(database, table)
    print(f"\n{database['sink']}, foreachPartition, task of partition {FAIL_PARTITION} "
          f"killed after {AFTER_ROWS} of {N // PARTS} rows, retried: {len(got)} rows "
          f"({duplicates(got)} duplicates, {N - len(set(got))} lost)")
    assert AFTER_ROWS % CHUNK == 0  # the dead attempt committed exactly AFTER_ROWS rows
    lo = FAIL_PARTITION * N // PARTS
    assert duplicates(got) == AFTER_ROWS, "the baseline shows no duplicates"
    assert got == sorted(list(range(N)) + list(range(lo, lo + AFTER_ROWS)))
