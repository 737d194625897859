"""The driver of tests/spark/test_speculation.py, run in a process of its own (one
SparkContext per process, and the suite's is local): the same write three times on a
standalone Spark cluster with speculation on — fenced, plain, and fenced with the
straggler sealing before the copy starts — with partition 1's first attempt a straggler
(tests/spark/faults.py SlowFirstSource; its marker files in WORKDIR/<run>). Prints one
JSON line.

    python -m tests.spark.speculation_job MASTER ENDPOINTS WORKDIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROWS, PARTS = 4000, 2
RUNS = (("on", "on", "half"), ("off", "off", "half"), ("sealed", "on", "sealed"))


def main(argv: list[str]) -> int:
    master, endpoints, workdir = argv
    work = Path(workdir)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the driver's own Python workers too
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from coord.audit.spark import local_only
    from coord.spark import register
    from coord.spark.sinks import SqliteSink
    from tests.spark import faults

    spark = (local_only(SparkSession.builder.master(master).appName("coord-speculation-test"))
             .config("spark.ui.enabled", "false")
             .config("spark.executor.memory", "512m")
             .config("spark.cores.max", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
             .config("spark.speculation", "true")
             .config("spark.speculation.interval", "100ms")
             .config("spark.speculation.quantile", "0.5")
             .config("spark.speculation.multiplier", "1.5")
             .config("spark.speculation.minTaskRuntime", "1s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    cloudpickle.register_pickle_by_value(faults)
    spark.dataSource.register(faults.SlowFirstSource)
    df = spark.range(0, ROWS, numPartitions=PARTS).selectExpr("id", "cast(id as string) as s")
    out: dict[str, object] = {}
    for run, fence, straggle in RUNS:
        db, markers = work / f"{run}.db", work / run
        markers.mkdir()
        (df.write.format("coord-fenced-slow-first").mode("append")
         .option("endpoints", endpoints).option("job", f"speculation-{run}")
         .option("sink", "sqlite").option("path", str(db)).option("table", "out")
         .option("fence", fence).option("version", "1").option("slow_partition", "1")
         .option("slow_after_rows", str(ROWS // PARTS // 2)).option("straggle", straggle)
         .option("markers", str(markers)).save())
        sink = SqliteSink(str(db), "out")
        table = sink.read()
        ids = sorted(table.column("id").to_pylist()) if table.num_rows else []
        out[run] = {"rows": len(ids), "unique": len(set(ids)),
                    "all": ids == list(range(ROWS)),
                    "refusals": [[r.partition, r.sequence, str(r.verdict)]
                                 for r in sink.refusals(f"speculation-{run}")],
                    "second_attempt": (markers / faults.COPY_STORED).exists(),
                    "published_epochs": dict(sink._db.execute(
                        "SELECT partition, epoch FROM out__attempts WHERE "
                        "published_version = 1").fetchall()) if fence == "on" else {}}
        sink.close()
    spark.stop()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
