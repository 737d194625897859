"""The driver of tests/spark/test_executor_kill.py, run in a process of its own (one
SparkContext per process, and the suite's is local[2], whose executor is the driver's
own JVM): Spark in local-cluster mode, two executors each a JVM of its own, and five
writes of the same DataFrame into one database — SQLite, each writer a database file of
its own under WORKDIR (table `out`), or a PostgreSQL server, each writer a table of its
own (`targets`) — partition 1's first attempt killing its executor JVM (kill -9)
mid-write (tests/spark/faults.py; the marker WORKDIR/<writer>/failed-1 holds the killed
JVM's pid):

- `fenced`: coord-fenced, version 1 (job `executor-kill-<database>`), after 1,000 rows
  stored;
- `plain`: the same with fence=off;
- `foreach`: df.foreachPartition(insert_rows) (coord.bench.spark_foreach), after its
  first 1,000-row chunk is committed;
- `jdbc`: Spark's df.write.jdbc (one transaction per partition), once the writer has
  inserted rows it has not committed (it holds SQLite's write lock, PostgreSQL's row
  lock on the table);
- `jdbc_none`: the same with isolationLevel=NONE (autocommit), once its first rows are
  visible.

    python -m tests.spark.executor_kill_job ENDPOINTS WORKDIR sqlite
    python -m tests.spark.executor_kill_job ENDPOINTS WORKDIR postgres URL JDBC_URL
"""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

ROWS, PARTS, FAIL_PARTITION, AFTER_ROWS = 16_000, 2, 1, 1_000
LO, HI = FAIL_PARTITION * ROWS // PARTS, (FAIL_PARTITION + 1) * ROWS // PARTS
WRITERS = ("fenced", "plain", "foreach", "jdbc", "jdbc_none")
SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
MASTER = "local-cluster[2,1,1024]"  # 2 executors (JVMs), 1 core, 1 GiB of worker memory


@dataclass(frozen=True)
class Target:
    """Where one writer writes: the sink options naming its table, and its JDBC URL and
    driver class."""

    options: dict[str, str]
    jdbc_url: str
    driver: str

    @property
    def table(self) -> str:
        return self.options["table"]


def targets(workdir: Path, database: list[str]) -> dict[str, Target]:
    """Each writer's table: `database` is ["sqlite"] (a file per writer, table `out`)
    or ["postgres", URL, JDBC_URL] (a table per writer on that server)."""
    from coord.testing.jdbc import sqlite_jdbc_url

    if database[0] == "sqlite":
        return {w: Target({"sink": "sqlite", "path": str(workdir / f"{w}.db"),
                           "table": "out"}, sqlite_jdbc_url(str(workdir / f"{w}.db")),
                          "org.sqlite.JDBC") for w in WRITERS}
    _, url, jdbc_url = database
    return {w: Target({"sink": "postgres", "url": url, "table": f"executor_kill_{w}"},
                      jdbc_url, "org.postgresql.Driver") for w in WRITERS}


def _query(target: Target, sql: str, args: tuple = ()) -> list[tuple]:
    """`sql` (`?` placeholders) on a connection of its own to `target`'s database."""
    if target.options["sink"] == "sqlite":
        db = sqlite3.connect(target.options["path"], timeout=60)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()
    import psycopg

    with psycopg.connect(target.options["url"], autocommit=True) as pg:
        return pg.execute(sql.replace("?", "%s"), args).fetchall()


def writing(target: Target) -> bool:
    """Another connection has inserted rows into `target`'s table in a transaction it
    has not committed: it holds SQLite's write lock (the database's), or PostgreSQL's
    ROW EXCLUSIVE lock on the table (taken by the first INSERT, held to the end)."""
    if target.options["sink"] == "postgres":
        return _query(target, "SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                      "c.oid = l.relation WHERE c.relname = ? AND l.granted AND "
                      "l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()",
                      (target.table,))[0][0] > 0
    db = sqlite3.connect(target.options["path"], timeout=0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as e:
        if "locked" not in str(e):
            raise
        return True
    finally:
        db.close()


def rows_visible(target: Target, at_least: int) -> bool:
    """At least `at_least` rows of the killed partition are committed in `target`."""
    n = _query(target, f"SELECT count(*) FROM {target.table} WHERE id >= ? AND id < ?",
               (LO, HI))
    return n[0][0] >= at_least


def main(argv: list[str]) -> int:
    endpoints, workdir, *database = argv
    work = Path(workdir)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python workers too
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from coord.audit.spark import local_only
    from coord.bench.spark_foreach import row_inserter
    from coord.spark import register
    from coord.spark.sinks import SqlSink, open_sink
    from coord.testing.jdbc import jars_conf
    from tests.spark import faults

    builder = (local_only(SparkSession.builder.master(MASTER).appName("coord-executor-kill-test"))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.executor.memory", "512m")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500"))
    for key, value in jars_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    cloudpickle.register_pickle_by_value(faults)
    spark.dataSource.register(faults.ExecutorKillSource)
    df = spark.range(0, ROWS, numPartitions=PARTS).selectExpr("id", "cast(id as string) s")
    to = targets(work, database)
    markers = {w: work / w for w in WRITERS}
    for writer in WRITERS:
        markers[writer].mkdir()
        if writer not in ("fenced", "plain"):  # the user's table exists
            table = open_sink(to[writer].options)
            assert isinstance(table, SqlSink)
            table.prepare(SCHEMA, plain=True)
            table.close()

    for writer, fence in (("fenced", "on"), ("plain", "off")):
        w = (df.write.format("coord-fenced-executor-kill").mode("append")
             .option("endpoints", endpoints).option("job", f"executor-kill-{database[0]}")
             .option("version", "1").option("fence", fence)
             .option("fail_partition", str(FAIL_PARTITION))
             .option("fail_after_rows", str(AFTER_ROWS))
             .option("markers", str(markers[writer])))
        for key, value in to[writer].options.items():
            w = w.option(key, value)
        w.save()
    foreach = to["foreach"]
    df.foreachPartition(faults.dying_foreach(row_inserter(foreach.options, foreach.table),
                                             FAIL_PARTITION, AFTER_ROWS,
                                             markers["foreach"], "executor"))
    jdbc = to["jdbc"]
    faults.killing_upstream(df, FAIL_PARTITION, AFTER_ROWS, markers["jdbc"],
                            lambda: writing(jdbc)).write.jdbc(
        jdbc.jdbc_url, jdbc.table, mode="append", properties={"driver": jdbc.driver})
    none = to["jdbc_none"]
    faults.killing_upstream(df, FAIL_PARTITION, AFTER_ROWS, markers["jdbc_none"],
                            lambda: rows_visible(none, AFTER_ROWS)).write.jdbc(
        none.jdbc_url, none.table, mode="append",
        properties={"driver": none.driver, "isolationLevel": "NONE"})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
