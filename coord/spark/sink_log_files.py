"""The files `coord history export-sink-log` writes into its directory, by name: what
`coord audit --sink-log DIR` reads. Names only, so the audit finds them without
importing the sinks (and the client's fence recipe they stand on)."""

from __future__ import annotations

LOG_FILE = "sink_log.parquet"
"""The sink's accepted writes (`coord.spark.sinks.log.EXPORT_SCHEMA`)."""

REFUSALS_FILE = "refusals.parquet"
"""The writes it refused (`coord.spark.sinks.log.REFUSALS_SCHEMA`)."""
