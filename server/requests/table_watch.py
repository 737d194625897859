"""What one inspection stream (server/api/table_streams.py) learns between two of its
wake-ups: which sessions changed, and that a batch of entries was applied.

The state machine emits no event when a session opens (it is told through the machine's
opener hook instead) nor when a living session releases a resource (the ownership event
names the resource, not who held it: a `SessionsWatch` keeps who holds what, from the
listing on, to know). Everything else that changes a session's row has an event naming
it: a key bound to it or taken from it, a grant, its end. So a sessions stream reads only
the rows that changed, however many sessions there are.
"""

from __future__ import annotations

import asyncio
from typing import Any

from coord.sm.records import OwnershipEvent, SessionEvent, WatchEvent
from coord.sm.sessions import Session


class TableWatch:
    """Told of every event and every applied batch on this member (`EventHub`)."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()

    def offer(self, event: Any) -> None:
        """One event of the batch being published."""

    def opened(self, session: Session) -> None:
        """A session opened (called inside apply: no I/O, no clocks)."""

    def applied(self) -> None:
        """A batch was applied and its events offered: the stream may look again."""
        self.wake.set()


class SessionsWatch(TableWatch):
    def __init__(self) -> None:
        super().__init__()
        self.dirty: set[int] = set()
        self.ended: dict[int, str] = {}  # id -> why (released | expired | severed)
        self.held: dict[tuple[str, str], int] = {}  # (group, resource) -> session id

    def hold(self, session: Session) -> None:
        """Record what a listed session holds (before any event after the listing)."""
        for pair in session.owned:
            self.held[pair] = session.id

    def offer(self, event: Any) -> None:
        if isinstance(event, WatchEvent):
            for kv in (event.kv, event.prev_kv):
                if kv is not None and kv.session_id:
                    self.dirty.add(kv.session_id)
        elif isinstance(event, OwnershipEvent):
            key = (event.group, event.resource)
            before = self.held.pop(key, 0)
            if before:
                self.dirty.add(before)
            if event.owner:
                self.held[key] = event.owner
                self.dirty.add(event.owner)
        elif isinstance(event, SessionEvent):
            self.dirty.add(event.session_id)
            self.ended[event.session_id] = event.type

    def opened(self, session: Session) -> None:
        self.dirty.add(session.id)
        self.ended.pop(session.id, None)  # an ended id asked for again (etcd lease ids)

    def take(self) -> tuple[list[int], dict[int, str]]:
        """The sessions changed since the last take (sorted), and why those that ended
        did."""
        dirty, ended = sorted(self.dirty), self.ended
        self.dirty, self.ended = set(), {}
        return dirty, ended
