"""The driver of tests/spark/test_driver_kill.py, run in a process of its own so that
the test can kill it (kill -9): one batch write of 4,000 rows in 2 partitions by
coord-fenced into a SQLite sink, job JOB version 1, on local[2]. Run with
$COORD_SPARK_PAUSE_AFTER_PUBLISH set (coord/spark/datasource.py), its commit stops
between the sink's publish and coord's record.

    python -m tests.spark.driver_job ENDPOINTS DB JOB
"""

from __future__ import annotations

import os
import sys

ROWS, PARTS = 4_000, 2


def main(argv: list[str]) -> int:
    endpoints, db, job = argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from coord.audit.spark import local_only
    from coord.spark import register

    spark = (local_only(SparkSession.builder.master("local[2]").appName("coord-driver-kill-test"))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    (spark.range(0, ROWS, numPartitions=PARTS).selectExpr("id", "cast(id as string) s")
     .write.format("coord-fenced").mode("append").option("endpoints", endpoints)
     .option("job", job).option("version", "1").option("sink", "sqlite")
     .option("path", db).option("table", "out").save())
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
