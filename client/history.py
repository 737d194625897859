"""The committed history, live: pages of rows a member replays from what it retains
(`History.Export`; the rows are coord.history's schema, the same an offline export of a
stopped member's data dir gives).

`HistoryCursor` makes the export a resumable stream: it remembers the last entry whose
rows were delivered, so a member failing mid-export is replaced by the next one, which
replays from its own snapshot and goes on after that entry (rows of one entry are never
split across pages, so nothing is lost or repeated). A start the member has compacted
away raises `CompactedError` (metadata `oldest_index`, `oldest_revision`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coord.client.cursors import Unpinned
from coord.client.errors import CompactedError, CoordError
from coord.client.retry import stream_may_resume
from coord.v1 import history_pb2

__all__ = ["HistoryCursor", "HistoryPage", "row_of"]

def row_of(message: history_pb2.HistoryRow) -> dict[str, Any]:
    """A row as a dict of its set columns (a missing column is null), in column order."""
    return {f.name: value for f, value in message.ListFields()}


@dataclass(frozen=True)
class HistoryPage:
    """Rows (dicts of set columns) and where the member's replay stands."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    member: str = ""
    schema_version: int = 0
    snapshot_index: int = 0  # the member replayed from its snapshot at this index
    replayed_index: int = 0  # the last entry replayed
    commit_index: int = 0  # the member's commit index when the page was read
    caught_up: bool = False
    done: bool = False  # the last page of an export that does not follow
    read_only: bool = False  # the member had no quorum: its prefix may be stale
    quorum_lost_ms: int = 0  # since when (the member's header), if read_only


class HistoryCursor(Unpinned):
    """The position of a History.Export stream: after the last entry delivered."""

    service = "History"
    method = "Export"

    def __init__(self, after_index: int = 0, from_revision: int = 0, follow: bool = False,
                 page_entries: int = 0) -> None:
        self.after_index = after_index
        self.from_revision = from_revision
        self.follow = follow
        self.page_entries = page_entries

    def request(self) -> history_pb2.ExportHistoryRequest:
        return history_pb2.ExportHistoryRequest(
            after_index=self.after_index, from_revision=self.from_revision,
            follow=self.follow, page_entries=self.page_entries)

    def feed(self, response: history_pb2.ExportHistoryPage) -> list[HistoryPage]:
        rows = [row_of(r) for r in response.rows if r.index > self.after_index]
        if rows:
            self.after_index = rows[-1]["index"]
        return [HistoryPage(rows, response.member, response.schema_version,
                            response.snapshot_index, response.replayed_index,
                            response.commit_index, response.caught_up, response.done,
                            response.header.read_only, response.header.quorum_lost_ms)]

    def on_error(self, err: CoordError) -> bool:
        if isinstance(err, CompactedError):
            return False
        return stream_may_resume(err)
