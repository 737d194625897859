"""Compaction of a history directory's runs: many small runs (a `--follow` export commits
one per second of activity) rewritten into few bigger ones, as Delta Lake's OPTIMIZE
does, so Spark opens a few large files instead of thousands of small ones.

Each group of consecutive small runs is read back in log order, written as one new run
(`HistorySink.stage`: its files under `_tmp-RUN/`, then moved in, still unlisted) and
committed by one manifest replace (`HistorySink.replace_runs`) that lists the new run
in place of the old ones: a reader sees the old runs or the new one, never both, never a
part. The replaced files stay on disk, listed as obsolete, for `retain_s` (a reader that
took the old manifest may still be reading them; Delta's VACUUM retention), then go. A
crash before the replace leaves unlisted files the next open deletes; after it, nothing
to undo. Only the writer holding the directory's lock compacts (the sink takes it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from coord.history.rows import Row
from coord.history.sink import HistorySink

TARGET_ROWS = 1_000_000  # rows per compacted run (Parquet files of tens of MB)
RETAIN_S = 3600.0  # replaced files kept this long for readers of the old manifest


@dataclass(frozen=True)
class Compaction:
    runs: int  # runs replaced
    files: int  # their files
    rows: int
    into_files: int  # files of the run that replaced them


def groups(runs: list[dict[str, Any]], target_rows: int) -> list[tuple[int, int]]:
    """[first, end) ranges of at least two consecutive small runs (under half the
    target), each range holding at most `target_rows` rows."""
    found: list[tuple[int, int]] = []
    first, rows = 0, 0
    for i, run in enumerate([*runs, None]):
        small = run is not None and run["rows"] < target_rows // 2
        if small and rows + run["rows"] <= target_rows:
            rows += run["rows"]
            continue
        if i - first >= 2:
            found.append((first, i))
        first, rows = (i, run["rows"]) if small else (i + 1, 0)
    return found


def compact(sink: HistorySink, target_rows: int = TARGET_ROWS,
            retain_s: float = RETAIN_S) -> list[Compaction]:
    """Rewrite every group of small runs into one run each; what was done, per group."""
    done = []
    for first, end in reversed(groups(sink.manifest["runs"], target_rows)):
        old = sink.manifest["runs"][first:end]
        entry, written = sink.stage(_rows(sink, old), old[0]["first_index"] - 1)
        entry["compacted_from"] = [r["run"] for r in old]
        notes = [r["read_only"] for r in old if r.get("read_only")]
        if notes:
            entry["read_only"] = _merged(notes)
        sink.replace_runs(first, end, entry, retain_s)
        done.append(Compaction(len(old), sum(len(r["files"]) for r in old), written.rows,
                               len(entry["files"])))
    return done[::-1]


def _merged(notes: list[dict[str, Any]]) -> dict[str, Any]:
    """The read-only notes of the runs a compacted run replaces, as one."""
    return {"member": ",".join(sorted({n["member"] for n in notes})),
            "pages": sum(n["pages"] for n in notes),
            "quorum_lost_ms": max(n["quorum_lost_ms"] for n in notes),
            "commit_index": max(n["commit_index"] for n in notes)}


def _rows(sink: HistorySink, runs: list[dict[str, Any]]) -> Iterator[Row]:
    """The runs' rows in log order (index, seq)."""
    files = [str(sink.out / f) for r in runs for f in r["files"]]
    if sink.fmt == "jsonl":
        import json

        for path in files:
            with open(path) as f:
                for line in f:
                    yield json.loads(line)
        return
    import pyarrow as pa
    import pyarrow.dataset as ds

    from coord.history.schema import PARTITION_COLUMNS, arrow_schema

    schema = arrow_schema()
    table = ds.dataset(files, schema=schema, format="parquet", partition_base_dir=str(sink.out),
                       partitioning=ds.partitioning(
                           pa.schema([schema.field(p) for p in PARTITION_COLUMNS]),
                           flavor="hive")).to_table()
    for batch in table.sort_by([("index", "ascending"), ("seq", "ascending")]).to_batches():
        yield from batch.to_pylist()


def small_runs(sink: HistorySink, target_rows: int = TARGET_ROWS) -> int:
    """How many runs groups() would replace now."""
    return sum(end - first for first, end in groups(sink.manifest["runs"], target_rows))


__all__ = ["RETAIN_S", "TARGET_ROWS", "Compaction", "compact", "groups", "small_runs"]
