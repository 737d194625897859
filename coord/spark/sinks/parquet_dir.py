"""A directory of Parquet files as a fenced sink.

Layout under the root:
  - `_coord/attempts/<job>/p<partition>/g<generation>-pid<pid>-e<epoch>/<seq>.parquet`:
    each accepted batch, written to a temporary name and renamed into place;
  - `_coord/fence/<job>/p<partition>.json`: the fence row, replaced by rename; every
    write holds the partition's lock file (flock) from judging to the rename, so two
    attempts cannot both pass the fence;
  - `_coord/manifests/<job>/v<version>.json`: the commit point. One manifest per
    published version lists the winners' files and their fence tokens; it appears by
    one atomic rename, so a version is either wholly visible or not at all;
  - `_coord/refusals.jsonl`: the refused writes, each with the fence row's token it was
    judged against (`held_*`: the newer holder and coord's revision of its grant).
  - `_coord/log.jsonl`: every accepted append, seal and publish (the sink log that
    `coord audit --sink-log` checks), a line written while the partition's lock is
    held, just after the fence row or manifest it records: per partition, the file's
    order is the order the sink accepted them. A crash between the two loses the line,
    which the audit reports as a sequence gap: loud, never a silent pass.
A publish holds the runs' lock (`_coord/locks/runs.lock`, which a driver starting a
run holds: `starting_run`) from the driver's run check to the manifest, and the job's
lock (`_coord/locks/jobs/<job>.lock`) throughout — version check, fence checks,
manifest, clearing superseded attempts — and so does `discard`: no clean-up can delete
what a manifest about to appear lists. It fsyncs the listed files and
every directory up to the root before writing the manifest, the manifest before its
rename, and the manifest's directories after it. Readers take the files the manifests
list (`committed_files`, `read`); files of losing attempts are deleted when a version
is published. `plain/` holds the unfenced baseline's
files. Local (POSIX) file systems only: the fence relies on flock and rename.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coord.client.recipes.fence import FencedWriteError, FenceRow, Token, judge, refused
from coord.client.recipes.sequence import ACCEPT
from coord.spark.attempt import RunCheck
from coord.spark.sinks.base import Refusal, RunGuard, SealError, Sink, check_winner
from coord.spark.sinks.durable import sync_paths

__all__ = ["ParquetDirSink"]

_JOB = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def _write_json(path: Path, value: object, durable: bool = True) -> None:
    """Replace `path` atomically. `durable`: fsync before the rename (manifests); fence
    rows skip it, as the SQLite sink's WAL with synchronous=NORMAL does: a power loss
    may lose the last updates, never leave a torn one."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w") as f:
        json.dump(value, f)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _attempt_dir(token: Token) -> str:
    return f"g{token.generation}-pid{token.pid}-e{token.epoch}"


class ParquetDirSink(Sink):
    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self._coord = self.root / "_coord"
        self._coord.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _check_job(job: str) -> None:
        if not _JOB.match(job):
            raise ValueError(f"job names a directory here: letters, digits, '.', '_', '-' "
                             f"(at most 128), got {job!r:.80}")

    @contextmanager
    def _lock(self, *parts: str) -> Iterator[None]:
        path = self._coord.joinpath("locks", *parts).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _fence_path(self, job: str, partition: int) -> Path:
        return self._coord / "fence" / job / f"p{partition}.json"

    def fence(self, job: str, partition: int) -> FenceRow | None:
        self._check_job(job)
        try:
            data = json.loads(self._fence_path(job, partition).read_text())
        except FileNotFoundError:
            return None
        return FenceRow(**data)

    def _save_fence(self, job: str, partition: int, row: FenceRow) -> None:
        path = self._fence_path(job, partition)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, {f: getattr(row, f) for f in FenceRow.__slots__}, durable=False)

    def _batch_dir(self, job: str, partition: int, token: Token) -> Path:
        return self._coord / "attempts" / job / f"p{partition}" / _attempt_dir(token)

    def _admit(self, job: str, partition: int, token: Token, seq: int) -> int | None:
        """Under the partition lock: the rows stored so far by this attempt if the write
        is accepted (0 for its first), None for a duplicate; refusals logged and raised;
        PartitionSealedError for a later copy of a sealed partition."""
        self._check_job(job)
        stored = self.fence(job, partition)
        verdict = judge(stored, token, seq)
        if refused(verdict):
            line = json.dumps(Refusal(job, partition, token, seq, str(verdict),
                                      stored and stored.token)
                              .as_row(int(time.time() * 1000)))
            with self._lock("refusals"), open(self._coord / "refusals.jsonl", "a") as f:
                f.write(line + "\n")
            raise FencedWriteError(verdict, job, partition, token, seq, stored)
        if verdict != ACCEPT:
            return None
        return 0 if seq == 0 or stored is None else stored.rows

    def append(self, job: str, partition: int, token: Token, seq: int,
               batch: pa.RecordBatch) -> None:
        with self._lock("fence", job, f"p{partition}"):
            rows = self._admit(job, partition, token, seq)
            if rows is None:
                return
            if batch.num_rows:  # an attempt's begin (no rows) only moves the fence
                directory = self._batch_dir(job, partition, token)
                directory.mkdir(parents=True, exist_ok=True)
                tmp = directory / f".{seq:09d}.{uuid.uuid4().hex}.tmp"
                pq.write_table(pa.Table.from_batches([batch]), tmp)
                os.replace(tmp, directory / f"{seq:09d}.parquet")
            self._save_fence(job, partition,
                             FenceRow.of(token, seq, False, rows + batch.num_rows))
            self._log("append", job, partition, token, seq, batch.num_rows)

    def seal(self, job: str, partition: int, token: Token, seq: int, rows: int) -> None:
        with self._lock("fence", job, f"p{partition}"):
            have = self._admit(job, partition, token, seq)
            if have is None:
                return
            if have != rows:
                raise SealError(f"{job!r} partition {partition}: the attempt sent {rows} "
                                f"rows, the sink stored {have}")
            self._save_fence(job, partition, FenceRow.of(token, seq, True, rows))
            self._log("seal", job, partition, token, seq, rows)

    # -- publishing ---------------------------------------------------------------------
    def _manifests(self, job: str) -> list[Path]:
        directory = self._coord / "manifests" / job
        if not directory.is_dir():
            return []
        return sorted(directory.glob("v*.json"), key=lambda p: int(p.stem[1:]))

    def committed_version(self, job: str) -> int | None:
        self._check_job(job)
        manifests = self._manifests(job)
        return int(manifests[-1].stem[1:]) if manifests else None

    def starting_run(self) -> AbstractContextManager[None]:
        return self._lock("runs")

    def publish(self, job: str, version: int, winners: dict[int, tuple[Token, int]],
                check: RunGuard | None = None) -> bool:
        """All under the runs' lock (`starting_run`'s), from the run check to the
        manifest, and the job's lock, which every publish and clean-up of `job` takes:
        the version check, the winners' fence checks (their partition locks held until
        the manifest is in place), the manifest, and the clearing of superseded
        attempts — so no clean-up can run between a check and the manifest that relies
        on it."""
        self._check_job(job)
        with self._lock("runs"), self._lock("jobs", job):
            checked = check() if check is not None else None
            done = self.committed_version(job)
            if done is not None and version <= done:
                return False
            entries = {}
            with ExitStack() as held:
                for partition, (token, rows) in sorted(winners.items()):
                    held.enter_context(self._lock("fence", job, f"p{partition}"))
                    check_winner(job, partition, self.fence(job, partition), token, rows)
                    files = sorted(self._batch_dir(job, partition, token).glob("*.parquet"))
                    sync_paths(files, self.root)
                    entries[str(partition)] = {
                        **token.as_dict(), "rows": rows,
                        "files": [str(p.relative_to(self.root)) for p in files]}
                manifest = self._coord / "manifests" / job / f"v{version}.json"
                manifest.parent.mkdir(parents=True, exist_ok=True)
                _write_json(manifest, {"job": job, "version": version, "partitions": entries,
                                       "published_ms": int(time.time() * 1000)})
                sync_paths([manifest], self.root, files=False)
                for partition, (token, rows) in sorted(winners.items()):
                    self._log("publish", job, partition, token, None, rows, checked)
            self._drop_unpublished(job, [int(p) for p in entries])
        return True

    def _published_dirs(self, job: str) -> set[Path]:
        dirs = set()
        for manifest in self._manifests(job):
            for part, entry in json.loads(manifest.read_text())["partitions"].items():
                token = Token(entry["generation"], entry["pid"], entry["epoch"])
                dirs.add(self._batch_dir(job, int(part), token))
        return dirs

    def _drop_unpublished(self, job: str, partitions: list[int],
                          only: dict[int, Token] | None = None) -> None:
        """Delete the files of unpublished attempts of these partitions that no longer
        hold the fence (superseded), or, with `only`, of exactly those attempts. The
        attempt holding a fence row is kept: it may be another run's, still writing.
        The caller holds the job's lock, so no manifest appears meanwhile."""
        keep = self._published_dirs(job)
        for partition in partitions:
            with self._lock("fence", job, f"p{partition}"):
                stored = self.fence(job, partition)
                if only is not None:
                    doomed = [self._batch_dir(job, partition, only[partition])]
                else:
                    base = self._coord / "attempts" / job / f"p{partition}"
                    doomed = list(base.glob("g*")) if base.is_dir() else []
                    if stored is not None:
                        keep = keep | {self._batch_dir(job, partition, stored.token)}
                for directory in doomed:
                    if directory not in keep:
                        shutil.rmtree(directory, ignore_errors=True)

    def discard(self, job: str, attempts: dict[int, Token]) -> None:
        self._check_job(job)
        with self._lock("jobs", job):
            self._drop_unpublished(job, sorted(attempts), only=attempts)

    def committed_files(self) -> list[Path]:
        root = self._coord / "manifests"
        files: list[Path] = []
        for job_dir in sorted(root.iterdir()) if root.is_dir() else ():
            for manifest in self._manifests(job_dir.name):
                for entry in json.loads(manifest.read_text())["partitions"].values():
                    files.extend(self.root / f for f in entry["files"])
        return files

    def _log(self, op: str, job: str, partition: int, token: Token, seq: int | None,
             rows: int, checked: RunCheck | None = None) -> None:
        """One accepted write in `_coord/log.jsonl` (the caller holds the partition's
        lock, so the line's place orders it within the partition)."""
        line = json.dumps({"op": op, "job": job, "partition": partition, **token.as_dict(),
                           "sequence": seq, "rows": rows, "at_ms": int(time.time() * 1000),
                           "run_job": checked and checked.job,
                           "checked_revision": checked and checked.revision})
        with self._lock("log"), open(self._coord / "log.jsonl", "a") as f:
            f.write(line + "\n")

    def log(self) -> pa.Table:
        from coord.spark.sinks.log import LOG_SCHEMA

        path = self._coord / "log.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        rows = [{**json.loads(line), "id": i} for i, line in enumerate(lines, 1)]
        return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)

    def refusals(self, job: str | None = None) -> list[Refusal]:
        path = self._coord / "refusals.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if job is None or r["job"] == job:
                out.append(Refusal.of_row(r))
        return out

    # -- unfenced baseline and reading --------------------------------------------------
    def append_plain(self, batch: pa.RecordBatch) -> None:
        directory = self.root / "plain"
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_batches([batch]),
                       directory / f"part-{uuid.uuid4().hex}.parquet")

    def visible_files(self) -> list[Path]:
        """What a reader reads: the committed files and the unfenced baseline's."""
        return self.committed_files() + sorted((self.root / "plain").glob("*.parquet"))

    def read(self) -> pa.Table:
        files = self.visible_files()
        if not files:
            return pa.table({})
        return pa.concat_tables([pq.read_table(f) for f in files])

    def close(self) -> None:
        pass
