"""A member's committed history, replayed from its log file: offline and live.

The log file is read through the server's read-only reader
(`coord.server.storage.log_reader`: how it opens a stopped, a killed or a running
member's file, and the format it shares with the member's writer); this module adds what
makes it history: only entries up to the commit index count, the replay starts from the
snapshot through the real state machine (`coord.history.replay`), and it goes page by
page, one read transaction per page (`MemberLog.step`). A running member's log keeps being
compacted, so a page that finds the entries after its position gone fails with
`Compacted` rather than skip them. The member serves this as its live export
(coord.server.api.history), a stopped member's data dir is read by `read_rows`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from coord.history.replay import Replayer
from coord.history.rows import Row
from coord.server.storage.log_format import SnapshotGone, StorageError, db_path
from coord.server.storage.log_reader import LogInfo, LogReader


class DataDirError(Exception):
    """The data dir cannot be read as a coord member's (says which file and why)."""


@contextmanager
def _as_data_dir_error(gone_again: bool = False) -> Iterator[None]:
    """The reader's StorageError (it names the file) as the DataDirError callers expect;
    with `gone_again`, a snapshot file gone is left as it is, to be read again."""
    try:
        yield
    except StorageError as exc:
        if gone_again and isinstance(exc, SnapshotGone):
            raise
        raise DataDirError(str(exc)) from None


def open_log(data_dir: str | os.PathLike[str]) -> LogReader:
    """A stopped member's log file, read-only."""
    with _as_data_dir_error():
        return LogReader(db_path(data_dir))


def info(data_dir: str | os.PathLike[str]) -> LogInfo:
    with open_log(data_dir) as reader, _as_data_dir_error():
        return reader.info()


class Compacted(DataDirError):
    """The entries asked for are gone: the log was compacted to a snapshot after them.
    `oldest_index` is the first entry still exportable; `compact_revision` the revision
    of that snapshot when known (rows from `compact_revision + 1` on are complete)."""

    def __init__(self, message: str, oldest_index: int, compact_revision: int = 0) -> None:
        super().__init__(message)
        self.oldest_index = oldest_index
        self.compact_revision = compact_revision


PAGE_ENTRIES = 2_000
SNAPSHOT_READS = 3


class MemberLog:
    """A member's committed history, replayed page by page from its snapshot through the
    real state machine (`Replayer`); rows of entries up to `after_index`, and rows below
    `from_revision`, are replayed but not returned. Refuses (`Compacted`) a start the
    snapshot has swallowed: `after_index` before the snapshot, or a `from_revision` at or
    below the snapshot's revision (some of its rows would be missing)."""

    def __init__(self, reader: LogReader, after_index: int = 0, from_revision: int = 0, *,
                 label: str = "") -> None:
        self.reader = reader  # closed with this
        self.label = label or str(reader.path)  # how errors name the member
        self.after_index = after_index
        self.from_revision = from_revision
        self.replayer = Replayer()
        self.info = LogInfo("", 0, 0, 0)
        self.started = False  # the snapshot was restored (the first step)

    @property
    def replayed_index(self) -> int:
        return self.replayer.last_index

    @property
    def caught_up(self) -> bool:
        return self.started and self.replayer.last_index >= self.info.commit_index

    def step(self, max_entries: int = PAGE_ENTRIES, upto: int | None = None) -> list[Row]:
        """Rows of the next `max_entries` committed entries (at most up to `upto`), read
        in one transaction; [] when caught up.

        The first step restores the snapshot the log names, from its own file. A live
        member that takes a newer snapshot meanwhile removes the old file once the log
        names the new one, which this step's transaction does not see yet: the step is
        read again in a new transaction (SNAPSHOT_READS times at most)."""
        for _ in range(SNAPSHOT_READS - 1):
            try:
                return self._step(max_entries, upto)
            except SnapshotGone:
                continue
        try:
            return self._step(max_entries, upto)
        except SnapshotGone as gone:
            raise DataDirError(f"{self.label}: the snapshot's file was removed "
                               f"{SNAPSHOT_READS} times before it could be read "
                               f"({gone})") from None

    def _step(self, max_entries: int, upto: int | None) -> list[Row]:
        with _as_data_dir_error(gone_again=True), self.reader.transaction():
            self.info = self.reader.info()
            if not self.started:
                self._start()
            elif self.info.snapshot_index > self.replayer.last_index:
                raise Compacted(
                    f"{self.label}: compacted to index {self.info.snapshot_index} while "
                    f"entry {self.replayer.last_index + 1} was next; export again from "
                    f"index {self.info.snapshot_index + 1}", self.info.snapshot_index + 1)
            hi = min(self.info.commit_index, self.replayer.last_index + max_entries)
            if upto is not None:
                hi = min(hi, upto)
            out: list[Row] = []
            for e in self.reader.entries(self.replayer.last_index + 1, hi + 1):
                rows, _ = self.replayer.apply(e.index, e.term, int(e.type), e.data)
                out += self._wanted(rows)
        if self.replayer.last_index < hi:
            raise DataDirError(f"{self.reader.path}: entries {self.replayer.last_index + 1}"
                               f"..{hi} are committed but missing from the log")
        return out

    def _start(self) -> None:
        snapshot = self.reader.snapshot()
        if not snapshot.is_empty:
            try:
                self.replayer.restore(snapshot.meta.index, snapshot.data)
            except SnapshotGone:
                raise
            except ValueError as exc:
                raise DataDirError(f"{self.reader.path}: snapshot at index "
                                   f"{snapshot.meta.index}: {exc}") from None
        self.started = True
        index, revision = self.info.snapshot_index, self.replayer.machine.revision
        if not index:
            return
        if 0 < self.after_index < index:
            raise Compacted(
                f"{self.label}: compacted to index {index} (revision {revision}); entries "
                f"{self.after_index + 1}..{index} are gone; the oldest exportable is entry "
                f"{index + 1} (revisions from {revision + 1})", index + 1, revision)
        if 0 < self.from_revision <= revision:
            raise Compacted(
                f"{self.label}: revision {self.from_revision} is compacted (snapshot at "
                f"index {index}, revision {revision}); the oldest available revision is "
                f"{revision + 1}", index + 1, revision)

    def _wanted(self, rows: list[Row]) -> list[Row]:
        after, since = self.after_index, self.from_revision
        if not after and not since:
            return rows
        return [r for r in rows if r["index"] > after and r["revision"] >= since]

    def flush(self) -> list[Row]:
        """At the end of what is to be read: the rows still held (see Replayer.flush)."""
        return self._wanted(self.replayer.flush())

    def close(self) -> None:
        self.reader.close()


def read_rows(data_dir: str | os.PathLike[str], after_index: int = 0,
              from_revision: int = 0) -> Iterator[Row]:
    """History rows of every committed entry the member retains, from its snapshot on;
    `after_index` skips entries already exported (they are still replayed)."""
    log = MemberLog(open_log(data_dir), after_index, from_revision, label=str(data_dir))
    try:
        while not log.caught_up:
            yield from log.step()
        yield from log.flush()
    finally:
        log.close()
