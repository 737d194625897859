"""The fenced writer against Spark's own `df.write.jdbc` into the same database (SQLite
through Debian's xerial driver, a real PostgreSQL server through Debian's pgjdbc), under
the same faults, in the same run:

- a task whose attempt 0 hands its writer 1,000 of its 2,000 rows and then dies,
  retried by Spark (tests/spark/faults.py: the fenced writer's Python worker kill -9s
  itself, `FaultySource`; Spark's JDBC writer runs in the JVM, so its task fails by an
  error raised in the DataFrame it pulls rows from, `failing_upstream` — a kill -9 there
  could lose the rows still buffered in the worker's output, and the fault would not be
  the same; each touches a marker when it fires). Spark's JDBC writer by default writes a
  partition in one database transaction, which the failure rolls back: 0 duplicates,
  as for the fence — the fence adds nothing there. With `isolationLevel=NONE`
  (autocommit: what a database without transactions or a bulk load gets) the dead
  attempt's rows stay: duplicates. That run is the proof the fault was injected: no
  duplicates there fails the test.
- then the whole job run again (a driver that died after its write, a scheduler's
  retry): Spark's JDBC writer appends everything again; the fenced writer's version is
  already published and the re-run writes nothing.
Every count is asserted exactly, and printed."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pytest

from coord.spark.sinks import SqlSink, open_sink
from coord.testing.jdbc import missing_jars, sqlite_jdbc_url
from tests.spark.faults import failing_upstream

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

N, PARTS = 8_000, 4
FAIL_PARTITION, AFTER_ROWS = 1, 1_000  # of its 2,000 rows; JDBC's batch is 1,000 rows
SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])


@pytest.fixture(scope="module")
def jdbc_drivers() -> None:
    """Missing drivers skip the module, or fail it under CI (CI=true), where `make venv`
    installs them."""
    missing = missing_jars()
    if missing:
        message = (f"JDBC drivers missing: {', '.join(missing)} (`make database-servers` "
                   "installs Debian's libpostgresql-jdbc-java and libxerial-sqlite-jdbc-java)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path, jdbc_drivers) -> dict[str, str]:
    """Where the writers write: the sink options naming the database (add `table`), its
    JDBC URL and driver class."""
    if request.param == "sqlite":
        path = str(tmp_path / "out.db")
        return {"sink": "sqlite", "path": path, "jdbc": sqlite_jdbc_url(path),
                "driver": "org.sqlite.JDBC"}
    server = request.getfixturevalue("postgres")
    return {"sink": "postgres", "url": server.url, "jdbc": server.jdbc_url,
            "driver": "org.postgresql.Driver"}


def open_table(database: dict[str, str], table: str) -> SqlSink:
    sink = open_sink({k: v for k, v in database.items() if k in ("sink", "path", "url")}
                     | {"table": table})
    assert isinstance(sink, SqlSink)
    return sink


def table_ids(database: dict[str, str], table: str) -> list[int]:
    """The ids a reader of `table` sees (the fenced sink's view, or a plain table)."""
    sink = open_table(database, table)
    try:
        rows = sink.read()
    finally:
        sink.close()
    return sorted(rows.column("id").to_pylist()) if rows.num_rows else []


def duplicates(ids: list[int]) -> int:
    return len(ids) - len(set(ids))


@pytest.mark.slow
def test_a_task_dying_mid_write_then_a_job_rerun_fenced_vs_spark_jdbc(
        spark, coord3, database, tmp_path):
    kind, tag = database["sink"], uuid.uuid4().hex[:8]
    tables = {w: f"{w}_{tag}" for w in ("fenced", "jdbc", "jdbc_none")}
    markers = {w: tmp_path / w for w in tables}
    for m in markers.values():
        m.mkdir()
    for writer in ("jdbc", "jdbc_none"):  # the target tables exist, as a user's do (Spark
        table = open_table(database, tables[writer])  # 4 cannot create one in SQLite:
        table.prepare(SCHEMA, plain=True)  # its check for the table fails the write)
        table.close()

    df = spark.range(0, N, numPartitions=PARTS).selectExpr("id", "cast(id as string) s")

    def fenced() -> None:
        w = (df.write.format("coord-fenced-faulty").mode("append")
             .option("fail_partition", str(FAIL_PARTITION))
             .option("fail_after_rows", str(AFTER_ROWS)).option("fail_by", "kill")
             .option("markers", str(markers["fenced"]))
             .option("endpoints", ",".join(coord3.endpoints)).option("job", f"jdbc-{tag}")
             .option("version", "1").option("table", tables["fenced"]))
        for k in ("sink", "path", "url"):
            if k in database:
                w = w.option(k, database[k])
        w.save()

    def jdbc(writer: str, **extra: str) -> None:
        failing = failing_upstream(df, FAIL_PARTITION, AFTER_ROWS, markers[writer])
        failing.write.jdbc(database["jdbc"], tables[writer], mode="append",
                           properties={"driver": database["driver"], **extra})

    fenced()
    jdbc("jdbc")
    jdbc("jdbc_none", isolationLevel="NONE")
    for writer, m in markers.items():  # each writer's task really failed mid-write
        assert (m / f"failed-{FAIL_PARTITION}").exists(), f"{writer}: the fault never fired"
    got = {w: table_ids(database, t) for w, t in tables.items()}
    print(f"\n{kind}, task of partition {FAIL_PARTITION} failed after {AFTER_ROWS} of "
          f"{N // PARTS} rows, retried: " + "; ".join(
              f"{w} {len(ids)} rows ({duplicates(ids)} duplicates, "
              f"{N - len(set(ids))} lost)" for w, ids in got.items()))
    assert got["fenced"] == list(range(N))
    assert got["jdbc"] == list(range(N))  # one transaction per partition: rolled back
    # autocommit: the dead attempt's first JDBC batch stayed (no duplicates here: the
    # fault was not injected, and the assertions above prove nothing)
    lo = FAIL_PARTITION * N // PARTS
    assert duplicates(got["jdbc_none"]) == AFTER_ROWS, "the baseline shows no duplicates"
    assert got["jdbc_none"] == sorted(list(range(N)) + list(range(lo, lo + AFTER_ROWS)))
    fence = open_table(database, tables["fenced"])
    try:  # published from the partition's second attempt (producer epoch 1)
        assert fence.fence(f"jdbc-{tag}", FAIL_PARTITION).epoch == 1
    finally:
        fence.close()

    for m in markers.values():
        (m / f"failed-{FAIL_PARTITION}").unlink()
    fenced()  # the whole job again: version 1 is published, no task writes
    jdbc("jdbc")  # Spark's writer appends it all again
    rerun = {w: table_ids(database, tables[w]) for w in ("fenced", "jdbc")}
    print(f"{kind}, the whole job run again: fenced {len(rerun['fenced'])} rows "
          f"({duplicates(rerun['fenced'])} duplicates); jdbc {len(rerun['jdbc'])} rows "
          f"({duplicates(rerun['jdbc'])} duplicates)")
    assert rerun["fenced"] == list(range(N))
    assert rerun["jdbc"] == sorted(list(range(N)) * 2), "the re-run was not a re-run"
