"""Fenced sinks: where a zombie's write lands, so where it must be refused.

`open_sink(options)` picks one from the data source's options: `sink=sqlite` with `path`
(the database file) and `table`, `sink=postgres` with `url` (a libpq URL or connection
string) and `table`, or `sink=parquet` with `path` (the directory).
"""

from __future__ import annotations

from collections.abc import Mapping

from coord.spark.sinks.base import PublishError, Refusal, SealError, Sink
from coord.spark.sinks.parquet_dir import ParquetDirSink
from coord.spark.sinks.sql import SqlSink
from coord.spark.sinks.sqlite import SqliteSink

__all__ = ["ParquetDirSink", "PublishError", "Refusal", "SealError", "Sink", "SqlSink",
           "SqliteSink", "open_sink"]

KINDS = ("sqlite", "postgres", "parquet")
WHERE = {"sqlite": "path", "postgres": "url", "parquet": "path"}  # the option naming it


def open_sink(options: Mapping[str, str]) -> Sink:
    """The sink the options name; ValueError saying what is missing or wrong."""
    kind = options.get("sink", "")
    if kind not in KINDS:
        raise ValueError(f"option sink must be one of {', '.join(KINDS)}, got {kind!r:.40}")
    where = options.get(WHERE[kind], "")
    if not where:
        raise ValueError(f"option {WHERE[kind]} is required for the {kind} sink")
    if kind == "parquet":
        return ParquetDirSink(where)
    table = options.get("table", "")
    if not table:
        raise ValueError(f"option table is required for the {kind} sink")
    if kind == "postgres":
        from coord.spark.sinks.postgres import PostgresSink  # psycopg only when used

        return PostgresSink(where, table)
    return SqliteSink(where, table)
