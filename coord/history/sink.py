"""Writing history rows: Parquet partitioned by date and kind (or JSONL), idempotently.

A run writes its files under `OUT/_tmp-RUN/` (Spark and pyarrow skip names starting
with `_` or `.`), moves them into place, then replaces the manifest
`OUT/_coord_history.json` atomically; the manifest is the commit, as Delta Lake's log is.
A reader takes the files the manifest lists (`committed_files`), so a run that died half
way leaves nothing a reader sees, and the next run deletes its leftovers. The manifest
records the last raft index and revision written, which is where a resumed export
starts, and, while the export's last pages came from a member without a quorum, who
served them (`read_only`: the cluster may have committed past `last_index`).
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coord.history.parquet_process import write_parquet_in_child
from coord.history.partitioned import PartitionedParquetWriter
from coord.history.rows import Row
from coord.history.schema import SCHEMA_VERSION

MANIFEST = "_coord_history.json"
LOCK = "_coord_history.lock"  # held (flock) by the one writer: an export or a compaction
FORMATS = ("parquet", "jsonl")
RUN_ID_DIGITS = 12  # a run's id: this many hex digits of a random UUID


class HistoryDirError(Exception):
    """An output or input directory that is not a coord history (or not this version)."""


@dataclass
class Written:
    rows: int = 0
    first_index: int = 0
    last_index: int = 0
    last_revision: int = 0


def read_manifest(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    path = Path(out) / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HistoryDirError(f"{path}: unreadable manifest: {exc}") from None
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise HistoryDirError(f"{path}: schema version {manifest.get('schema_version')!r}, "
                              f"this coord reads {SCHEMA_VERSION}")
    return manifest


def committed_files(out: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """(format, absolute paths of the files committed runs wrote)."""
    manifest = read_manifest(out)
    if manifest is None:
        raise HistoryDirError(f"{out}: no {MANIFEST}: not a coord history directory")
    base = Path(out).absolute()
    return manifest["format"], [str(base / f) for run in manifest["runs"] for f in run["files"]]


class HistorySink:
    """Writes runs of rows into one history directory."""

    def __init__(self, out: str | os.PathLike[str], fmt: str = "parquet",
                 source: str = "", *, parquet_in_child: bool = False) -> None:
        """`parquet_in_child`: Parquet runs are written by a second process
        (`coord.history.parquet_process`), for runs long enough to repay starting it."""
        self.parquet_in_child = parquet_in_child
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
        self.out = Path(out)
        if self.out.exists() and not self.out.is_dir():
            raise HistoryDirError(f"{self.out}: exists and is not a directory")
        # The lock and `_tmp-RUN/` directories are all that a first run which never
        # committed leaves (an export every member refused, a synth killed while it
        # wrote): empty still, so the same command may run again (the leftovers go).
        if self.out.is_dir() and not _empty_but_for_a_dead_first_run(self.out) \
                and read_manifest(self.out) is None:
            raise HistoryDirError(f"{self.out}: not empty and holds no {MANIFEST}; "
                                  "refusing to write into it")
        self.manifest = read_manifest(self.out) or {
            "schema_version": SCHEMA_VERSION, "format": fmt, "source": source, "runs": [],
            "rows": 0, "last_index": 0, "last_revision": 0}
        if self.manifest["format"] != fmt:
            raise HistoryDirError(f"{self.out}: holds {self.manifest['format']}, not {fmt}")
        self.fmt = fmt
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.out)
        try:  # what another writer committed before we held the lock
            self.manifest = read_manifest(self.out) or self.manifest
            self._tail: dict[str, Any] | None = self.manifest.get("read_only")
            self._clean_leftovers()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Let another writer in (the lock also goes with the process)."""
        if not self._lock.closed:
            self._lock.close()

    def __enter__(self) -> HistorySink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_index(self) -> int:
        return int(self.manifest["last_index"])

    def note_read_only(self, served: dict[str, Any] | None) -> None:
        """What the manifest says of the history's tail: `served` (the member without a
        quorum whose committed prefix it ends with: the cluster may have committed past
        `last_index`), or None once a member with a quorum served it. Committed with the
        next run, or by `commit_note()` when no rows come (a cut-off member commits none)."""
        self._tail = served

    def commit_note(self) -> None:
        """Commit the manifest if `note_read_only` changed what it says (no run)."""
        if self._tail != self.manifest.get("read_only") and self.manifest["runs"]:
            self._commit()

    def _clean_leftovers(self) -> None:
        """Files of runs that never committed (a crash between write and manifest), and
        files a compaction replaced once their retention is over (`vacuum`)."""
        self.vacuum()
        listed = {f for run in self.manifest["runs"] for f in run["files"]}
        listed |= {f for old in self.manifest.get("obsolete", []) for f in old["files"]}
        for path in list(self.out.rglob("*")):
            rel = path.relative_to(self.out).as_posix()
            if _run_in_progress(path):
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_file() and not rel.startswith("_") and rel not in listed:
                path.unlink()

    def write(self, rows: Iterable[Row], read_only: dict[str, Any] | None = None) -> Written:
        """Write one run (rows must follow the last committed index) and commit it;
        `read_only`: the member without a quorum that served (some of) its rows, recorded
        with the run."""
        entry, written = self.stage(rows, self.last_index)
        if written.rows:
            if read_only:
                entry["read_only"] = read_only
            self.manifest["runs"].append(entry)
            self.manifest["rows"] += written.rows
            self.manifest["last_index"] = written.last_index
            self.manifest["last_revision"] = max(self.manifest["last_revision"],
                                                 written.last_revision)
            self._commit()
        return written

    def stage(self, rows: Iterable[Row], after: int) -> tuple[dict[str, Any], Written]:
        """Write a run's files (rows after index `after`, in order) under `_tmp-RUN/` and
        move them into place, uncommitted: (its manifest entry, what it holds). Until a
        manifest lists them, readers do not see them and the next open deletes them."""
        run = uuid.uuid4().hex[:RUN_ID_DIGITS]
        tmp = self.out / f"_tmp-{run}"
        tmp.mkdir()
        written = Written()
        try:
            counted = _counting(rows, written, after)
            with _young_collections_spaced():
                if self.fmt == "parquet" and self.parquet_in_child:
                    write_parquet_in_child(counted, tmp, run)
                elif self.fmt == "parquet":
                    _write_parquet(counted, tmp, run)
                else:
                    _write_jsonl(counted, tmp / f"part-{run}.jsonl")
            files = []
            for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
                rel = path.relative_to(tmp)
                (self.out / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, self.out / rel)
                files.append(rel.as_posix())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return {"run": run, "files": files, "rows": written.rows,
                "first_index": written.first_index, "last_index": written.last_index}, written

    def replace_runs(self, first: int, end: int, run: dict[str, Any], retain_s: float) -> None:
        """Commit `run` (its files already in place) in place of runs[first:end]: one
        manifest replace, so a reader sees the old runs or the new one, never both or a
        part. The old files stay, listed as obsolete, for `retain_s` (readers that took
        the old manifest may still read them), then `vacuum` deletes them."""
        old = self.manifest["runs"][first:end]
        if sum(r["rows"] for r in old) != run["rows"]:
            raise ValueError("a compacted run must hold exactly the rows it replaces")
        self.manifest["runs"][first:end] = [run]
        self.manifest.setdefault("obsolete", []).append({
            "files": [f for r in old for f in r["files"]],
            "delete_after_ms": int((time.time() + retain_s) * 1000)})
        self._commit()
        self.vacuum()

    def vacuum(self) -> None:
        """Delete the obsolete files whose retention is over (after the manifest stops
        listing them: a crash in between leaves files the next open deletes)."""
        now_ms = time.time() * 1000
        due = [o for o in self.manifest.get("obsolete", []) if o["delete_after_ms"] <= now_ms]
        if not due:
            return
        self.manifest["obsolete"] = [o for o in self.manifest["obsolete"] if o not in due]
        self._commit()
        for old in due:
            for f in old["files"]:
                (self.out / f).unlink(missing_ok=True)

    def _commit(self) -> None:
        if self._tail is None:
            self.manifest.pop("read_only", None)
        else:
            self.manifest["read_only"] = self._tail
        path = self.out / MANIFEST
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.manifest, indent=1))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)


YOUNG_COLLECTION_OBJECTS = 100_000
"""Objects allocated and not yet freed that the cyclic collector lets pile up before it
looks at the youngest, while a run's rows are made and written (Python's default: 700).
The pipeline keeps many objects alive for a while (the state machine's records, the
columns buffered for Parquet), so at the default a young collection came every few
hundred of them and moved the survivors on towards the full collections that walk the
whole heap: about a tenth of a synth's CPU. Cycles are still collected, a hundred
thousand objects apart."""


@contextmanager
def _young_collections_spaced() -> Iterator[None]:
    """The collector's first threshold at YOUNG_COLLECTION_OBJECTS while the block runs;
    the thresholds it had, after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_OBJECTS, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _run_in_progress(path: Path) -> bool:
    """Is `path` a run's `_tmp-RUN/`, where it writes its files before they move into
    place (left behind by a run that died, deleted by the next open)? RUN is the run's
    id, as `stage` makes it."""
    return (re.fullmatch(f"_tmp-[0-9a-f]{{{RUN_ID_DIGITS}}}", path.name) is not None
            and path.is_dir())


def _empty_but_for_a_dead_first_run(out: Path) -> bool:
    """Does `out` hold nothing, or only what a first run that never committed leaves:
    the writers' lock and, if it died while writing, its `_tmp-RUN/` (never a `_tmp-`
    directory without our lock beside it: that is someone else's)?"""
    entries = list(out.iterdir())
    names = {p.name for p in entries}
    runs = {p.name for p in entries if _run_in_progress(p)}
    return names <= {LOCK} | runs and (not runs or LOCK in names)


def _lock(out: Path) -> Any:
    """An exclusive flock on OUT/_coord_history.lock, or HistoryDirError."""
    f = open(out / LOCK, "a+")  # noqa: SIM115 - held for the sink's life
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise HistoryDirError(f"{out}: another writer (an export or a compaction) is "
                              "writing into it; wait for it to end") from None
    return f


def _counting(rows: Iterable[Row], written: Written, after: int) -> Iterator[Row]:
    for row in rows:
        index = row["index"]
        if index <= after:
            raise ValueError(f"row at index {index} is not after the last written ({after})")
        if not written.first_index:
            written.first_index = index
        written.last_index = index
        revision = row["revision"] if "revision" in row else None  # no call per row
        if revision is not None and revision > written.last_revision:
            written.last_revision = revision
        written.rows += 1
        yield row


def _write_parquet(rows: Iterator[Row], out: Path, run: str) -> None:
    writer = PartitionedParquetWriter(out, run)
    try:
        writer.add_rows(rows)
    except BaseException:
        writer.abort()
        raise
    writer.close()


def _write_jsonl(rows: Iterator[Row], path: Path) -> None:
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps({k: v for k, v in row.items() if v is not None},
                               separators=(",", ":")))
            f.write("\n")
