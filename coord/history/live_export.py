"""The live export's policy: a cluster's history pages, through `coord.client`, into runs.

A member replays its retained history and streams pages of rows (`History.Export`); they
go into the history directory in runs the sink commits one at a time (its manifest
records the last index and revision written, where the next export resumes): every
`COMMIT_ROWS` rows, at the end, and when following at least every `FOLLOW_COMMIT_S`, its
small runs compacted into one every `compact_runs` (coord.history.compact). Whatever
stops an export (Ctrl-C, a start the member compacted away, a failed call) first commits
what arrived, so the next export resumes after it.

A member without a quorum can only serve its own committed prefix: correct entries, but
the majority may have committed past them. By default such a member refuses the export
(NO_QUORUM) and the client goes on at a member with a quorum, as it does for any
linearizable read. A client that said read_only_ok takes what such a member has: every
page it sends is flagged (`header.read_only`); the export warns once per member and
period, records the member in the run's manifest entry and, while its last pages came
from it, in the manifest's `read_only` (the tail may be stale). Meanwhile the client looks
for a member with a quorum (its read-only prober) and the export moves there, going on
after the last entry it has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from coord.client.errors import CoordError, LimitExceededError
from coord.client.history import HistoryCursor, HistoryPage
from coord.client.read_only import ModeChange
from coord.client.sync import Client
from coord.client.sync_stream import Stream
from coord.history.compact import compact, small_runs
from coord.history.rows import Row
from coord.history.sink import HistorySink
from coord.wire import EXPORT_SLOTS

COMMIT_ROWS = 200_000
FOLLOW_COMMIT_S = 1.0
MOVE_WAIT_S = 5.0  # the prober's first rounds (its pauses double from 0.1 s to 2 s)
SLOT_WAIT_S = 60.0  # for a member busy with other exports to free a slot
SLOT_PAUSES_S = (0.1, 0.2, 0.5, 1.0, 2.0)  # between asks, the last repeated


def pages_across_moves(client: Client, cursor: HistoryCursor, moved: threading.Event,
                       say: Callable[[str], None]) -> Iterator[HistoryPage]:
    """The export's pages; when the client has moved to a member with a quorum (its
    prober, after a flagged page) while a member without one serves the export, the
    stream is reopened there, after the last entry delivered. An export that would end
    on a flagged page waits up to MOVE_WAIT_S for such a move if the client knows other
    members (it could end short of what the majority committed). A member already
    serving as many exports as it may (each costs it a share of its loop) is asked
    again for up to SLOT_WAIT_S, the operator told once: the slots free as other
    exports end, and a refusal would lose nothing but the operator's time."""
    busy_since: float | None = None
    asks = 0
    while True:
        stream: Stream[HistoryPage] = Stream(client, cursor)  # type: ignore[arg-type]
        try:
            for page in stream:
                busy_since = None
                yield page
                may_move = page.read_only and page.done and len(client.endpoints) > 1
                if moved.wait(MOVE_WAIT_S) if may_move else moved.is_set():
                    moved.clear()
                    if page.read_only:
                        break
                if page.done:
                    return
            else:
                return
        except LimitExceededError as exc:
            if exc.metadata.get("limit") != EXPORT_SLOTS:
                raise
            now = time.monotonic()
            if busy_since is None:
                busy_since, asks = now, 0
                say(f"{exc.message} (waiting up to {SLOT_WAIT_S:.0f} s for a slot)")
            if now - busy_since >= SLOT_WAIT_S:
                raise
            time.sleep(SLOT_PAUSES_S[min(asks, len(SLOT_PAUSES_S) - 1)])
            asks += 1
        finally:
            stream.cancel()


class ReadOnlyPages:
    """What the export saw of members without a quorum: a warning when one starts
    serving it (and a word when that ends), a note per committed run, the manifest's
    tail note and the summary's episodes."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.episodes: list[dict[str, Any]] = []  # member, pages, quorum_lost_ms, commit_index
        self.current: dict[str, Any] | None = None  # the last page was flagged
        self.run: dict[str, Any] | None = None  # flagged pages with rows, since the last commit

    def page(self, page: HistoryPage) -> None:
        if not page.read_only:
            if self.current is not None:
                self.say(f"[green]member {page.member} serves the export with a quorum[/] "
                         f"(after {self.current['pages']} page(s) served read-only by "
                         f"{self.current['member']})")
                self.current = None
            return
        current = _counted(self.current, page)
        if current is not self.current:
            self.current = current
            self.episodes.append(current)
            self.say(f"[bold yellow]warning:[/] member {page.member} has no quorum (cut off "
                     f"for {page.quorum_lost_ms / 1000:.1f} s): it serves its own committed "
                     f"history, to index {page.commit_index}, and the majority may have "
                     "committed past it. The rows are committed entries; the export goes on "
                     "when that member rejoins a majority or one with a quorum answers, and "
                     "the manifest records it (read_only).")
        if page.rows:
            self.run = _counted(self.run, page)

    def take_run(self) -> dict[str, Any] | None:
        run, self.run = self.run, None
        return run

    @property
    def tail(self) -> dict[str, Any] | None:
        return None if self.current is None else dict(self.current)


def _counted(note: dict[str, Any] | None, page: HistoryPage) -> dict[str, Any]:
    """`note` (a new one if it is about another member) with `page` counted."""
    if note is None or note["member"] != page.member:
        note = {"member": page.member, "pages": 0, "quorum_lost_ms": 0, "commit_index": 0}
    note["pages"] += 1
    note["quorum_lost_ms"] = max(note["quorum_lost_ms"], page.quorum_lost_ms)
    note["commit_index"] = page.commit_index
    return note


class LiveExport:
    """One live export into `sink`, resuming after its manifest's last index. `say`
    shows the operator a line (a commit, a compaction, a member without a quorum)."""

    def __init__(self, sink: HistorySink, client: Client, say: Callable[[str], None], *,
                 from_revision: int = 0, follow: bool = False, compact_runs: int = 0) -> None:
        self.sink, self.client, self.say = sink, client, say
        self.follow, self.compact_runs = follow, compact_runs
        self.cursor = HistoryCursor(sink.last_index, from_revision, follow)
        self.read_only = ReadOnlyPages(say)
        self.rows = 0  # committed by this export
        self.first_index = 0  # the first entry it committed
        self._pending: list[Row] = []
        self._last_commit = time.monotonic()
        self._moved = threading.Event()
        client.add_mode_listener(self._on_mode)

    @property
    def rows_seen(self) -> int:
        """Rows committed or waiting for the next commit."""
        return self.rows + len(self._pending)

    def run(self, on_page: Callable[[HistoryPage], None]) -> None:
        """Export until the member's commit index at the start (following: until
        stopped), `on_page` told of every page as it arrives. Ctrl-C and a CoordError
        (a compacted start, no member with a quorum, ...) are raised once what arrived
        is committed."""
        pages = pages_across_moves(self.client, self.cursor, self._moved, self.say)
        try:
            for page in pages:
                self.read_only.page(page)
                self._pending += page.rows
                on_page(page)
                if (len(self._pending) >= COMMIT_ROWS or page.done or (
                        self.follow and time.monotonic() - self._last_commit >= FOLLOW_COMMIT_S)):
                    self.commit()
        except (KeyboardInterrupt, CoordError):
            self.commit()
            raise
        finally:
            pages.close()

    def commit(self) -> None:
        """Commit what arrived as one run (nothing arrived: the read-only note alone);
        following, then compact the small runs."""
        self._last_commit = time.monotonic()
        self.sink.note_read_only(self.read_only.tail)
        if not self._pending:
            self.sink.commit_note()
            return
        written = self.sink.write(self._pending, read_only=self.read_only.take_run())
        self._pending = []
        self.rows += written.rows
        self.first_index = self.first_index or written.first_index
        self.say(f"committed through index {written.last_index} "
                 f"(revision {self.sink.manifest['last_revision']})")
        if self.follow and self.compact_runs and small_runs(self.sink) >= self.compact_runs:
            for done in compact(self.sink):
                self.say(f"compacted {done.runs} runs ({done.files} files) "
                         f"into one ({done.into_files} files)")

    def _on_mode(self, change: ModeChange) -> None:
        if change.moved:
            self._moved.set()
