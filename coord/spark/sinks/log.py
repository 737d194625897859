"""A fenced sink's log of accepted writes, exported as Parquet for `coord audit`.

Every accepted append (sequence 0 is an attempt's announcement, no rows), seal and
publish is one row, numbered (`id`) in the order the sink accepted it: for one (job,
partition) that order is the sink's own serialization (the fence row's lock), which is
the ordering evidence the sink checks use. The audit reads exported files only, so the
sink writes them here and `coord audit --sink-log DIR` reads them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["LOG_FILE", "LOG_SCHEMA", "export_log"]

LOG_SCHEMA = pa.schema([
    ("id", pa.int64()), ("op", pa.string()),  # append | seal | publish
    ("job", pa.string()), ("partition", pa.int64()),
    ("generation", pa.int64()), ("pid", pa.int64()), ("epoch", pa.int64()),
    ("run", pa.int64()), ("version", pa.int64()),
    ("sequence", pa.int64()),  # null for a publish
    ("rows", pa.int64()), ("at_ms", pa.int64()),
])

LOG_FILE = "sink_log.parquet"


def export_log(log: pa.Table, out: str | os.PathLike[str]) -> Path:
    """Write `log` (a sink's `log()`) to `out/sink_log.parquet`, atomically (a temp
    file renamed), and return the directory."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{LOG_FILE}.tmp"  # a dot: readers of the directory skip it
    pq.write_table(log.cast(LOG_SCHEMA), tmp)
    os.replace(tmp, directory / LOG_FILE)
    return directory
