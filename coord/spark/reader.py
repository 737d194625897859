"""Reading a Parquet sink back: `spark.read.format("coord-fenced")` with the writer's
`sink` and `path` options returns exactly the committed rows.

Spark's own Parquet reader cannot list the table (everything sits under `_coord/`, which
it skips as hidden) and must not: the attempt directories also hold the files of
attempts never published — aborted, superseded, still writing. The committed listing is
the manifests' (`ParquetDirSink.visible_files`), taken once when the query is planned,
so a read sees whole versions only; committed files are never deleted, so a publish
meanwhile cannot pull a file from under a running read. One Spark partition per file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from coord.spark.options import sink_options
from coord.spark.sinks import ParquetDirSink, open_sink

__all__ = ["CommittedParquetReader", "committed_schema", "visible_files"]


def visible_files(options: Mapping[str, str]) -> list[Path]:
    """The files a read returns, for the sink the options name (the Parquet sink only:
    the SQLite sink's rows are read from its view, option `table`, in the database)."""
    sink = open_sink(sink_options(options))
    try:
        if not isinstance(sink, ParquetDirSink):
            raise ValueError("the coord-fenced reader reads the parquet sink; read the "
                             "sqlite sink's view (option table) from the database")
        return sink.visible_files()
    finally:
        sink.close()


def committed_schema(options: Mapping[str, str]) -> StructType:
    """The table's schema, from its first committed file (the files share one)."""
    files = visible_files(options)
    if not files:
        raise ValueError(f"nothing is committed under {sink_options(options).get('path')!r} "
                         f"yet: no schema to read (pass one with .schema(...))")
    return from_arrow_schema(pq.read_schema(files[0]))


class CommittedParquetReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(str(f)) for f in visible_files(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from pq.ParquetFile(partition.value).iter_batches()
