"""A history directory as a DataFrame: the files its manifest commits, and only those."""

from __future__ import annotations

import os
from typing import Any

from coord.history.schema import COLUMNS, PARTITION_COLUMNS
from coord.history.sink import committed_files

_SPARK_TYPES = {"int64": "bigint", "int32": "int", "string": "string", "bool": "boolean"}


def ddl_schema() -> str:
    """The row schema as Spark DDL (what JSONL is read with)."""
    return ", ".join(f"`{n}` {_SPARK_TYPES[t]}" for n, t, _ in COLUMNS)


def load_history(spark: Any, path: str | os.PathLike[str]) -> Any:
    """Every committed row of the history at `path`, with the schema's columns (the
    partition columns `date` and `kind` included, as strings)."""
    fmt, files = committed_files(path)
    if not files:
        return spark.createDataFrame([], ddl_schema())
    if fmt == "jsonl":
        return spark.read.schema(ddl_schema()).json(files)
    df = (spark.read.option("basePath", os.fspath(os.path.abspath(path)))
          .option("mergeSchema", "false")
          .schema(ddl_schema()).parquet(*files))
    # Partition values come back from the paths; keep them as the schema's strings.
    return df.select(*[f"`{n}`" for n, _, _ in COLUMNS if n not in PARTITION_COLUMNS],
                     *PARTITION_COLUMNS)
