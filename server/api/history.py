"""The History service: this member's committed history as rows, live.

The member replays what it retains — its snapshot and its log, read from its own SQLite
file through a separate read-only connection (`coord.server.storage.log_reader`) —
through a fresh state machine, with the same code the offline reader runs on a stopped
member (`coord.history.datadir.MemberLog` over `coord.history.replay`), so a live export
and an offline one give the same rows for the same entries. The snapshot is restored on
a thread; the log is replayed on the member's event loop in slices of about `SLICE_S`,
each followed by as long a pause (a replay thread would hold the GIL for 5 ms at a time
against the loop's every system call: measured back to back on a loaded box, a put's p99
during an export from the leader was 0.8-1.2 s with a thread, 0.12-0.16 s with slices,
its max 1.5-2.6 s against 0.4-0.5 s), so heartbeats and applies go on in between.

A start the member has compacted away is refused (OUT_OF_RANGE, COMPACTED) with the
oldest index and revision it can still export. Without `follow` the stream ends at the
commit index the member had when it began (`done`); with it, new entries are streamed as
they are applied, and an empty page comes at least every `HEARTBEAT_S` so a client can
commit what it has and show it is alive. A follower that falls behind a snapshot of this
member (a compaction past its position) ends with COMPACTED: it resumes elsewhere or
starts again from the oldest retained entry.

While auth is on, an export needs READ on the `admin` key `history`: its rows are every
command's (`coord.sm.access`).

A member without a quorum serves its own committed prefix: correct entries, but the
majority may have committed past it. So it is the member's mode (server/upkeep/mode.py)
that decides, as for every read: a caller that said read_only_ok is served with every
page flagged (`header.read_only`, `quorum_lost_ms`); any other is refused NO_QUORUM, at
the start or at the first page after the member lost its quorum, and its stream resumes
on a member with one. A mode change wakes a following export, so the flag (or the
refusal) comes at once rather than with the next heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc

from coord.history import datadir
from coord.history.rows import Row
from coord.history.schema import SCHEMA_VERSION
from coord.server.api.common import Caller, admit, require
from coord.server.api.errors import ApiError, abort
from coord.server.requests.coordinator import Coordinator
from coord.server.storage.log_format import StorageError, db_path
from coord.server.storage.log_reader import LogReader
from coord.sm.access import HISTORY_EXPORT
from coord.v1 import history_pb2, history_pb2_grpc
from coord.wire import EXPORT_SLOTS

log = logging.getLogger(__name__)

MAX_EXPORTS = 2  # concurrent exports per member: each may take up to half its loop
MAX_PAGE_ENTRIES = 10_000
HEARTBEAT_S = 1.0
SLICE_S = 0.002  # replay this long, then let the loop run as long
_FIELDS = frozenset(f.name for f in history_pb2.HistoryRow.DESCRIPTOR.fields)


def row_to_pb(row: Row) -> history_pb2.HistoryRow:
    return history_pb2.HistoryRow(
        **{k: v for k, v in row.items() if v is not None and k in _FIELDS})


class HistoryService(history_pb2_grpc.HistoryServicer):
    def __init__(self, coord: Coordinator, data_dir: Path) -> None:
        self.coord = coord
        self.member = coord.node.me.name
        self.data_dir = data_dir
        self._slots = asyncio.Semaphore(MAX_EXPORTS)
        self._waiters: set[asyncio.Event] = set()
        self._restoring: dict[datadir.MemberLog, asyncio.Future] = {}  # still on a thread

    def applied(self) -> None:
        """An apply listener: wakes every following export."""
        for event in self._waiters:
            event.set()

    def mode_changed(self, _change: object) -> None:
        """A mode listener: a following export flags (or refuses) its next page now."""
        self.applied()

    def _header(self, caller: Caller) -> Any:
        """The member's header for a page; ApiError (UNAVAILABLE, NO_QUORUM) if the
        member has no quorum and the caller did not say read_only_ok."""
        admit(self.coord, caller)
        return self.coord.header()

    async def Export(self, request, context) -> AsyncIterator[Any]:  # noqa: N802
        if self._slots.locked():
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED",
                        f"member {self.member} is already serving {MAX_EXPORTS} exports; "
                        "try another member or later", {"limit": EXPORT_SLOTS})
        page = min(request.page_entries or datadir.PAGE_ENTRIES, MAX_PAGE_ENTRIES)
        caller = Caller.of(context)
        try:
            await require(self.coord, caller, HISTORY_EXPORT)  # every command's rows
            self._header(caller)  # refused before any replay starts
        except ApiError as exc:
            await exc.abort(context)
        async with self._slots:
            woken = asyncio.Event()
            self._waiters.add(woken)
            member_log: datadir.MemberLog | None = None
            try:
                try:
                    member_log = datadir.MemberLog(
                        LogReader(db_path(self.data_dir), live=True), request.after_index,
                        request.from_revision, label=f"member {self.member}")
                    async for reply in self._pages(member_log, request.follow, page, woken,
                                                   lambda: self._header(caller)):
                        yield reply
                except ApiError as exc:  # the member lost its quorum: go to one with it
                    await exc.abort(context)
                except datadir.Compacted as exc:
                    await abort(context, grpc.StatusCode.OUT_OF_RANGE, "COMPACTED", str(exc), {
                        "compact_revision": str(exc.compact_revision),
                        "oldest_revision": str(exc.compact_revision + 1),
                        "oldest_index": str(exc.oldest_index)})
                except (datadir.DataDirError, StorageError) as exc:
                    log.warning("%s: history export failed: %s", self.member, exc)
                    await abort(context, grpc.StatusCode.INTERNAL, "EXPORT_FAILED", str(exc))
            finally:
                self._waiters.discard(woken)
                if member_log is not None:
                    self._close(member_log)

    def _close(self, member_log: datadir.MemberLog) -> None:
        """Close the export's connection, once its thread (if any) is done with it: a
        client gone during the snapshot's restore leaves the thread running."""
        restoring = self._restoring.pop(member_log, None)
        if restoring is not None and not restoring.done():
            restoring.add_done_callback(lambda _: member_log.close())
        else:
            member_log.close()

    async def _replay(self, member_log: datadir.MemberLog, page: int,
                      upto: int | None) -> list[Row]:
        """The rows of up to `page` more entries (fewer once caught up, or at `upto`)."""
        rows: list[Row] = []
        if not member_log.started:  # restoring the snapshot is one long step: a thread's
            restoring = asyncio.get_running_loop().run_in_executor(
                None, member_log.step, 1, upto)
            self._restoring[member_log] = restoring
            try:
                rows = await asyncio.shield(restoring)
            finally:
                if restoring.done():
                    del self._restoring[member_log]
        end = member_log.replayed_index + page
        if upto is not None:
            end = min(end, upto)
        n = 16
        while True:  # at least one step: it also reads the member's new commit index
            started = time.monotonic()
            rows += member_log.step(min(n, end - member_log.replayed_index), upto)
            if member_log.replayed_index >= end or member_log.caught_up:
                return rows
            took = time.monotonic() - started
            n = max(1, min(1024, int(n * SLICE_S / max(took, 1e-4))))
            await asyncio.sleep(took)  # at most half the loop: the member's work comes first

    async def _pages(self, member_log: datadir.MemberLog, follow: bool, page: int,
                     woken: asyncio.Event, header: Callable[[], Any]) -> AsyncIterator[Any]:
        upto: int | None = None
        while True:
            woken.clear()
            rows = await self._replay(member_log, page, upto)
            info = member_log.info
            if upto is None and not follow:
                upto = info.commit_index  # the history as it was when the export began
            done = upto is not None and member_log.replayed_index >= upto
            if done:
                rows += member_log.flush()
            yield history_pb2.ExportHistoryPage(
                rows=[row_to_pb(r) for r in rows], member=self.member,
                schema_version=SCHEMA_VERSION, snapshot_index=info.snapshot_index,
                replayed_index=member_log.replayed_index, commit_index=info.commit_index,
                caught_up=member_log.caught_up, done=done, header=header())
            if done:
                return
            while follow and member_log.caught_up:
                try:
                    await asyncio.wait_for(woken.wait(), HEARTBEAT_S)
                    break
                except TimeoutError:
                    yield history_pb2.ExportHistoryPage(
                        member=self.member, schema_version=SCHEMA_VERSION,
                        snapshot_index=info.snapshot_index,
                        replayed_index=member_log.replayed_index,
                        commit_index=info.commit_index, caught_up=True, header=header())
