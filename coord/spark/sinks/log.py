"""A fenced sink's log of accepted writes, exported as Parquet for `coord audit`.

Every accepted append (sequence 0 is an attempt's announcement, no rows), seal and
publish is one row, numbered (`id`) in the order the sink accepted it: for one (job,
partition) that order is the sink's own serialization (the fence row's lock), which is
the ordering evidence the sink checks use. Each row carries the writer's token,
coord's revision of its ownership grant included. The audit reads exported files only,
so the sink writes them here and `coord audit --sink-log DIR` reads them; the export
adds where coord keeps each row's claim (the ownership group and resource, the producer
key, as `coord.spark.attempt` names them), so the audit joins the log with coord's
history without knowing the writer's naming.

A publish row also carries the driver's run check made inside it (`run_job`,
`checked_revision`: at that revision of coord's state, the row's `run` was the newest run
of `run_job`), and the export adds the run slot it read (`run_group`, `run_resource`):
the audit checks against coord's grants of that slot that no newer run had started by
then.

The refused writes (`Sink.refusals`) go beside the log, in `refusals.parquet`: a refusal
is no accepted write, so it stays out of the log the other checks group by token. Each
names the refused token and the fence row's (`held_*`), with the ownership claim coord
keeps the partition under, so `sink.refusal_holder_granted` finds the holder's grant.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

import pyarrow as pa
import pyarrow.parquet as pq

from coord.spark.attempt import RUN, group_of, producer_key, resource_of
from coord.spark.sink_log_files import LOG_FILE, REFUSALS_FILE
from coord.spark.sinks.base import TOKEN_FIELDS, Refusal
from coord.spark.sinks.durable import fsync_path, sync_paths

__all__ = ["EXPORT_SCHEMA", "LOG_SCHEMA", "REFUSALS_SCHEMA", "LogFiles", "export_log",
           "refusals_table", "with_coord_names"]

LOG_SCHEMA = pa.schema([
    ("id", pa.int64()), ("op", pa.string()),  # append | seal | publish
    ("job", pa.string()), ("partition", pa.int64()),
    ("generation", pa.int64()),
    ("revision", pa.int64()),  # coord's revision of the token's ownership grant
    ("pid", pa.int64()), ("epoch", pa.int64()),
    ("run", pa.int64()), ("version", pa.int64()),
    ("sequence", pa.int64()),  # null for a publish
    ("rows", pa.int64()), ("at_ms", pa.int64()),
    # a publish: the driver's check_run inside it (coord.spark.attempt.RunCheck), the
    # job whose run slot it read and the revision of coord's state it read it at, when
    # `run` was the newest run; null for other rows and a publish without a check
    ("run_job", pa.string()), ("checked_revision", pa.int64()),
])

COORD_NAMES = pa.schema([
    ("group", pa.string()), ("resource", pa.string()),  # the partition's ownership claim
    ("producer", pa.string()),  # its InitProducer key
])
RUN_NAMES = pa.schema([
    ("run_group", pa.string()), ("run_resource", pa.string()),  # a publish's run slot
])
EXPORT_SCHEMA = pa.schema([*LOG_SCHEMA, *COORD_NAMES, *RUN_NAMES])

REFUSALS_SCHEMA = pa.schema([
    ("job", pa.string()), ("partition", pa.int64()),
    *((k, pa.int64()) for k in TOKEN_FIELDS),  # the refused token
    ("sequence", pa.int64()), ("verdict", pa.string()),
    *((f"held_{k}", pa.int64()) for k in TOKEN_FIELDS),  # the fence row's; null: none
    COORD_NAMES.field("group"), COORD_NAMES.field("resource"),
])


def with_coord_names(log: pa.Table) -> pa.Table:
    """`log` (LOG_SCHEMA) with the names coord keeps each row's (job, partition) under,
    and a publish's run slot under (EXPORT_SCHEMA): what the audit joins with coord's
    history."""
    log = log.cast(LOG_SCHEMA)
    if not log.num_rows:
        return EXPORT_SCHEMA.empty_table()
    # named once per (job, partition): a log has millions of rows, few partitions
    pairs = log.group_by(["job", "partition"]).aggregate([]).to_pylist()
    names = pa.Table.from_pylist(
        [{**p, "group": group_of(p["job"]), "resource": resource_of(p["partition"]),
          "producer": producer_key(p["job"], p["partition"])} for p in pairs],
        schema=pa.schema([LOG_SCHEMA.field("job"), LOG_SCHEMA.field("partition"),
                          *COORD_NAMES]))
    runs = pa.Table.from_pylist(
        [{"run_job": job, "run_group": group_of(job), "run_resource": RUN}
         for job in log.column("run_job").unique().drop_null().to_pylist()],
        schema=pa.schema([LOG_SCHEMA.field("run_job"), *RUN_NAMES]))
    return (log.join(names, ["job", "partition"]).join(runs, "run_job")
            .sort_by("id").select(EXPORT_SCHEMA.names))


def refusals_table(refusals: list[Refusal]) -> pa.Table:
    """`refusals` (a sink's `refusals()`) as REFUSALS_SCHEMA rows, with the ownership
    claim coord keeps each (job, partition) under. A `Refusal` carries no time, so the
    sink's `at_ms` is not exported."""
    rows = []
    for r in refusals:
        row = r.as_row(0)
        del row["at_ms"]
        rows.append({**row, "group": group_of(r.job), "resource": resource_of(r.partition)})
    return pa.Table.from_pylist(rows, schema=REFUSALS_SCHEMA)


class LogFiles:
    """The export's two files in `out`, written part by part: a log too big to hold at
    once (a synthesized one of millions of rows, `coord.spark.synth`) is written as it
    is made, each part with its coord names (`with_coord_names`; parts come in `id`
    order). The files appear whole at `commit`, each renamed from a temp file; a
    `LogFiles` left without a commit removes its temp files. The log file is the
    commit point, as readers take it (`coord audit --sink-log`, a kept synth): a
    directory holds the log only beside the refusals written with it."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.directory = Path(out)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._tmp = {name: self.directory / f".{name}.tmp"  # a dot: readers skip it
                     for name in (LOG_FILE, REFUSALS_FILE)}
        self._writers: dict[str, pq.ParquetWriter] = {}
        try:
            for name, schema in ((LOG_FILE, EXPORT_SCHEMA), (REFUSALS_FILE, REFUSALS_SCHEMA)):
                self._writers[name] = pq.ParquetWriter(self._tmp[name], schema)
        except BaseException:
            self.__exit__(None, None, None)  # the one opened is closed and removed
            raise

    def write(self, log: pa.Table, refusals: Iterable[Refusal] = ()) -> None:
        """One part: `log` rows (LOG_SCHEMA) and the writes refused meanwhile."""
        if log.num_rows:
            self._writers[LOG_FILE].write_table(with_coord_names(log))
        refused = refusals_table(list(refusals))
        if refused.num_rows:
            self._writers[REFUSALS_FILE].write_table(refused)

    def commit(self) -> Path:
        """Close both files and move them into place, durably; the directory. A crash
        at any point leaves the earlier export whole, no log, or this one whole: an
        earlier log goes first, the refusals take their place, the log comes last."""
        for writer in self._writers.values():
            writer.close()
        sync_paths(list(self._tmp.values()), self.directory)
        self._writers = {}
        (self.directory / LOG_FILE).unlink(missing_ok=True)
        fsync_path(self.directory)
        for name in (REFUSALS_FILE, LOG_FILE):  # each rename durable before the next
            os.replace(self._tmp[name], self.directory / name)
            fsync_path(self.directory)
        return self.directory

    def __enter__(self) -> LogFiles:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
        for tmp in self._tmp.values():  # not committed, or not wholly: no temp file stays
            tmp.unlink(missing_ok=True)


def export_log(log: pa.Table, out: str | os.PathLike[str],
               refusals: list[Refusal] = ()) -> Path:
    """Write `log` (a sink's `log()`) with its coord names (`with_coord_names`) to
    `out/sink_log.parquet` and `refusals` (its `refusals()`) to `out/refusals.parquet`,
    the two as one (`LogFiles.commit`), and return the directory."""
    with LogFiles(out) as files:
        files.write(log, refusals)
        return files.commit()
