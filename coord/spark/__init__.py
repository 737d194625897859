"""A fenced, exactly-once Spark writer on coord's ownership and producer ids.

    from coord.spark import register
    register(spark)
    (df.write.format("coord-fenced")
       .option("endpoints", "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")
       .option("job", "orders-daily").option("version", "20261125")
       .option("sink", "sqlite").option("path", "/data/out.db").option("table", "orders")
       .mode("append").save())

The driver starts a run of the job in coord, which fences every older run; each task
attempt of it claims (job, partition) in coord (`attempt`) and writes its batches to a
sink that judges every write against a fence row (`fence`, `sinks`) — the first attempt
to seal a partition wins, later copies write nothing — and the driver publishes the
attempts Spark committed, recording the job version (required) so a re-run of it is a
no-op (`jobs`). `datasource` is the Spark side: the batch writer and the Structured
Streaming writer (key `<job>.<query id>`, micro-batch id = version); `reader` reads a
Parquet sink's committed rows back (`spark.read.format("coord-fenced")`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the `coord-fenced` data source with a SparkSession."""
    from coord.spark.datasource import FencedDataSource

    spark.dataSource.register(FencedDataSource)
