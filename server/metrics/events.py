"""Counts of what the state machine emits on this member (`EventHub.watch_tables`):
ownership changes per group and kind, and ended sessions per reason. Counted as the
events are published after each applied batch, never inside apply."""

from __future__ import annotations

from typing import Any

from coord.server.requests.table_watch import TableWatch
from coord.sm.records import OwnershipEvent, SessionEvent


class EventCounts(TableWatch):
    """Told of every event by the hub; counts the two kinds the metrics export."""

    def __init__(self) -> None:
        super().__init__()
        self.ownership: dict[tuple[str, str], int] = {}  # (group, kind) -> changes
        self.sessions_ended: dict[str, int] = {}  # reason -> sessions

    def offer(self, event: Any) -> None:
        if isinstance(event, OwnershipEvent):
            key = (event.group, event.kind)
            self.ownership[key] = self.ownership.get(key, 0) + 1
        elif isinstance(event, SessionEvent):
            self.sessions_ended[event.type] = self.sessions_ended.get(event.type, 0) + 1

    def applied(self) -> None:
        """Nothing waits on this watch (the base class wakes a stream)."""
