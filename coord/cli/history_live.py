"""`coord history export --endpoints`: the live export, through `coord.client`.

A member replays its retained history and streams pages of rows (`History.Export`); they
go into the history directory in runs the sink commits one at a time (its manifest
records the last index and revision written, where the next export resumes): every
`COMMIT_ROWS` rows, at the end, and with `--follow` at least every `FOLLOW_COMMIT_S`,
its small runs compacted into one every `--compact-runs` (coord.history.compact).
Ctrl-C commits what arrived, then stops.

A member without a quorum can only serve its own committed prefix: correct entries, but
the majority may have committed past them. By default such a member refuses the export
(NO_QUORUM) and the client goes on at a member with a quorum, as it does for any
linearizable read; with none reachable the export stops, saying so. `--read-only-ok`
takes what such a member has: every page it sends is flagged (`header.read_only`), the
export warns once per member and period, records the member in the run's manifest entry
and, while its last pages came from it, in the manifest's `read_only` (the tail may be
stale), and in the printed summary. Meanwhile the client looks for a member with a quorum
(its read-only prober) and the export moves there, going on after the last entry it has.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from coord.client.history import HistoryCursor, HistoryPage
from coord.client.read_only import ModeChange
from coord.client.sync import Client, Stream

COMMIT_ROWS = 200_000
FOLLOW_COMMIT_S = 1.0
MOVE_WAIT_S = 5.0  # the prober's first rounds (its pauses double from 0.1 s to 2 s)


def pages_across_moves(client: Client, cursor: HistoryCursor,
                       moved: threading.Event) -> Iterator[HistoryPage]:
    """The export's pages; when the client has moved to a member with a quorum (its
    prober, after a flagged page) while a member without one serves the export, the
    stream is reopened there, after the last entry delivered. An export that would end
    on a flagged page waits up to MOVE_WAIT_S for such a move if the client knows other
    members (it could end short of what the majority committed)."""
    while True:
        stream: Stream[HistoryPage] = Stream(client, cursor)  # type: ignore[arg-type]
        try:
            for page in stream:
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
        finally:
            stream.cancel()


class ReadOnlyPages:
    """What the export saw of members without a quorum: a warning when one starts
    serving it (and a word when that ends), a note per committed run, the manifest's
    tail note and the summary's episodes."""

    def __init__(self, say: Any) -> None:
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
        if self.current is None or self.current["member"] != page.member:
            self.current = {"member": page.member, "pages": 0, "quorum_lost_ms": 0,
                            "commit_index": 0}
            self.episodes.append(self.current)
            self.say(f"[bold yellow]warning:[/] member {page.member} has no quorum (cut off "
                     f"for {page.quorum_lost_ms / 1000:.1f} s): it serves its own committed "
                     f"history, to index {page.commit_index}, and the majority may have "
                     "committed past it. The rows are committed entries; the export goes on "
                     "when that member rejoins a majority or one with a quorum answers, and "
                     "the manifest records it (read_only).")
        _count(self.current, page)
        if page.rows:
            if self.run is None or self.run["member"] != page.member:
                self.run = {"member": page.member, "pages": 0, "quorum_lost_ms": 0,
                            "commit_index": 0}
            _count(self.run, page)

    def take_run(self) -> dict[str, Any] | None:
        run, self.run = self.run, None
        return run

    @property
    def tail(self) -> dict[str, Any] | None:
        return None if self.current is None else dict(self.current)


def _count(note: dict[str, Any], page: HistoryPage) -> None:
    note["pages"] += 1
    note["quorum_lost_ms"] = max(note["quorum_lost_ms"], page.quorum_lost_ms)
    note["commit_index"] = page.commit_index


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def export_live(args: argparse.Namespace) -> int:
    """`--endpoints`: see the module's docstring."""
    from coord.client.endpoints import parse_endpoints
    from coord.client.errors import CompactedError, CoordError
    from coord.history.compact import compact, small_runs
    from coord.history.sink import HistoryDirError, HistorySink
    from coord.progress import progress_bar

    if args.compact_runs < 0 or args.compact_runs == 1:
        _say("coord history export: --compact-runs must be 0 (never) or >= 2")
        return 2
    try:
        endpoints = parse_endpoints(args.endpoints)
        sink = HistorySink(args.out, args.format, f"live {','.join(endpoints)}")
    except (ValueError, HistoryDirError) as exc:
        _say(f"coord history export: {exc}")
        return 2
    after = sink.last_index
    if after:
        _say(f"resuming after index {after} (revision {sink.manifest['last_revision']})")
    totals = {"rows": 0, "first_index": 0}
    started = time.monotonic()
    code = 0
    moved = threading.Event()

    def on_mode(change: ModeChange) -> None:
        if change.moved:
            moved.set()

    with sink, Client(endpoints, read_only_ok=args.read_only_ok,  # the first listed first
                      randomize_endpoints=False) as client, \
            progress_bar("export") as progress:
        client.add_mode_listener(on_mode)
        task = progress.add_task("export", total=None, rate="")
        flagged = ReadOnlyPages(lambda m: progress.console.print(m, soft_wrap=True))
        pending: list[dict[str, Any]] = []
        last_commit = time.monotonic()

        def commit() -> None:
            nonlocal pending, last_commit
            last_commit = time.monotonic()
            sink.note_read_only(flagged.tail)
            if not pending:
                sink.commit_note()
                return
            written = sink.write(pending, read_only=flagged.take_run())
            pending = []
            totals["rows"] += written.rows
            totals["first_index"] = totals["first_index"] or written.first_index
            progress.console.print(f"committed through index {written.last_index} "
                                   f"(revision {sink.manifest['last_revision']})")
            if args.follow and args.compact_runs and small_runs(sink) >= args.compact_runs:
                for done in compact(sink):
                    progress.console.print(f"compacted {done.runs} runs ({done.files} files) "
                                           f"into one ({done.into_files} files)")

        cursor = HistoryCursor(after, args.from_revision, args.follow)
        pages = pages_across_moves(client, cursor, moved)
        try:
            for page in pages:
                flagged.page(page)
                pending += page.rows
                start = max(after, page.snapshot_index)
                rate = (totals["rows"] + len(pending)) / max(time.monotonic() - started, 1e-9)
                progress.update(task, total=max(page.commit_index - start, 1),
                                completed=page.replayed_index - start,
                                rate=f"{page.member}: {rate:,.0f} rows/s")
                if (len(pending) >= COMMIT_ROWS or page.done
                        or (args.follow and time.monotonic() - last_commit >= FOLLOW_COMMIT_S)):
                    commit()
        except KeyboardInterrupt:
            commit()
            code = 0 if args.follow else 130
        except CompactedError as exc:
            commit()
            oldest = exc.metadata.get("oldest_revision", "?")
            _say(f"coord history export: {exc.message}; to start there, export into a new "
                 f"--out (with --from-revision {oldest})")
            code = 2
        except CoordError as exc:
            commit()
            hint = ("; no member with a quorum answered: --read-only-ok exports what a member "
                    "without one has committed (flagged stale)"
                    if exc.reason == "NO_QUORUM" and not args.read_only_ok else "")
            _say(f"coord history export: {exc}{hint}")
            code = 1
        finally:
            pages.close()
        if flagged.current is not None:
            flagged.say(
                f"[bold yellow]warning:[/] the export ends with entries served by member "
                f"{flagged.current['member']} without a quorum (to index "
                f"{flagged.current['commit_index']}): the cluster may have committed more; "
                "export again into this --out (it resumes) once a member with a quorum "
                "answers")
    seconds = time.monotonic() - started
    print(json.dumps({"out": args.out, "rows": totals["rows"],
                      "first_index": totals["first_index"],
                      "last_index": sink.last_index,
                      "last_revision": sink.manifest["last_revision"],
                      "seconds": round(seconds, 3),
                      "rows_per_second": round(totals["rows"] / seconds if seconds else 0),
                      "read_only": flagged.episodes,
                      "stale": flagged.current is not None}))
    return code
