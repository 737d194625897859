"""The driver of tests/spark/test_executor_kill.py, run in a process of its own (one
SparkContext per process, and the suite's is local[2], whose executor is the driver's
own JVM): Spark in local-cluster mode, two executors each a JVM of its own, and five
writes of the same DataFrame into SQLite, each in a database file of its own under
WORKDIR (table `out`), partition 1's first attempt killing its executor JVM (kill -9)
mid-write (tests/spark/faults.py; the marker WORKDIR/<writer>/failed-1 holds the killed
JVM's pid):

- `fenced`: coord-fenced, version 1 (job `executor-kill`), after 1,000 rows stored;
- `plain`: the same with fence=off;
- `foreach`: df.foreachPartition(insert_rows) (coord.bench.spark_foreach), after its
  first 1,000-row chunk is committed;
- `jdbc`: Spark's df.write.jdbc (one transaction per partition), once the writer holds
  the database's write lock (it has inserted rows it has not committed);
- `jdbc_none`: the same with isolationLevel=NONE (autocommit), once its first rows are
  visible.

    python -m tests.spark.executor_kill_job ENDPOINTS WORKDIR
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pyarrow as pa

ROWS, PARTS, FAIL_PARTITION, AFTER_ROWS = 16_000, 2, 1, 1_000
LO, HI = FAIL_PARTITION * ROWS // PARTS, (FAIL_PARTITION + 1) * ROWS // PARTS
WRITERS = ("fenced", "plain", "foreach", "jdbc", "jdbc_none")
SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
MASTER = "local-cluster[2,1,1024]"  # 2 executors (JVMs), 1 core, 1 GiB of worker memory


def write_locked(path: str) -> bool:
    """Another connection holds `path`'s write lock (a transaction that has written)."""
    db = sqlite3.connect(path, timeout=0, isolation_level=None)
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


def rows_visible(path: str, at_least: int) -> bool:
    """At least `at_least` rows of the killed partition are committed in `path`."""
    db = sqlite3.connect(path, timeout=60)
    try:
        n = db.execute("SELECT count(*) FROM out WHERE id >= ? AND id < ?", (LO, HI))
        return n.fetchone()[0] >= at_least
    finally:
        db.close()


def main(argv: list[str]) -> int:
    endpoints, workdir = argv
    work = Path(workdir)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python workers too
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from coord.bench.spark_foreach import row_inserter
    from coord.spark import register
    from coord.spark.sinks import SqliteSink
    from coord.testing.jdbc import jars_conf, sqlite_jdbc_url
    from tests.spark import faults

    builder = (SparkSession.builder.master(MASTER).appName("coord-executor-kill-test")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.memory", "512m")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500"))
    for key, value in jars_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    cloudpickle.register_pickle_by_value(faults)
    spark.dataSource.register(faults.ExecutorKillSource)
    df = spark.range(0, ROWS, numPartitions=PARTS).selectExpr("id", "cast(id as string) s")
    db = {w: str(work / f"{w}.db") for w in WRITERS}
    markers = {w: work / w for w in WRITERS}
    for writer in WRITERS:
        markers[writer].mkdir()
        if writer not in ("fenced", "plain"):  # the user's table exists
            table = SqliteSink(db[writer], "out")
            table.prepare(SCHEMA, plain=True)
            table.close()

    for writer, fence in (("fenced", "on"), ("plain", "off")):
        (df.write.format("coord-fenced-executor-kill").mode("append")
         .option("endpoints", endpoints).option("job", "executor-kill")
         .option("version", "1").option("fence", fence).option("sink", "sqlite")
         .option("path", db[writer]).option("table", "out")
         .option("fail_partition", str(FAIL_PARTITION))
         .option("fail_after_rows", str(AFTER_ROWS))
         .option("markers", str(markers[writer])).save())
    insert = row_inserter({"sink": "sqlite", "path": db["foreach"]}, "out")
    df.foreachPartition(faults.dying_foreach(insert, FAIL_PARTITION, AFTER_ROWS,
                                             markers["foreach"], "executor"))
    path = db["jdbc"]
    faults.killing_upstream(df, FAIL_PARTITION, AFTER_ROWS, markers["jdbc"],
                            lambda: write_locked(path)).write.jdbc(
        sqlite_jdbc_url(path), "out", mode="append", properties={"driver": "org.sqlite.JDBC"})
    path_none = db["jdbc_none"]
    faults.killing_upstream(df, FAIL_PARTITION, AFTER_ROWS, markers["jdbc_none"],
                            lambda: rows_visible(path_none, AFTER_ROWS)).write.jdbc(
        sqlite_jdbc_url(path_none), "out", mode="append",
        properties={"driver": "org.sqlite.JDBC", "isolationLevel": "NONE"})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
