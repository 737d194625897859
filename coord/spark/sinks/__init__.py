"""Fenced sinks: where a zombie's write lands, so where it must be refused.

`open_sink(options)` picks one from the data source's options: `sink=sqlite` with `path`
(the database file) and `table`, or `sink=parquet` with `path` (the directory).
"""

from __future__ import annotations

from collections.abc import Mapping

from coord.spark.sinks.base import PublishError, Refusal, SealError, Sink
from coord.spark.sinks.parquet_dir import ParquetDirSink
from coord.spark.sinks.sqlite import SqliteSink

__all__ = ["ParquetDirSink", "PublishError", "Refusal", "SealError", "Sink", "SqliteSink",
           "open_sink"]

KINDS = ("sqlite", "parquet")


def open_sink(options: Mapping[str, str]) -> Sink:
    """The sink the options name; ValueError saying what is missing or wrong."""
    kind = options.get("sink", "")
    path = options.get("path", "")
    if kind not in KINDS:
        raise ValueError(f"option sink must be one of {', '.join(KINDS)}, got {kind!r:.40}")
    if not path:
        raise ValueError(f"option path is required for the {kind} sink")
    if kind == "sqlite":
        table = options.get("table", "")
        if not table:
            raise ValueError("option table is required for the sqlite sink")
        return SqliteSink(path, table)
    return ParquetDirSink(path)
