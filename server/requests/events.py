"""Fan-out of what the state machine emits after each apply — KV changes, ownership
changes, session events — to the streams subscribed on this member, and auth events to
this member's token keeper. Every member applies every command, so a client may watch
on any member."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coord.server.requests.table_watch import TableWatch
from coord.sm.auth import AuthEvent
from coord.sm.machine import CoordMachine
from coord.sm.records import OwnershipEvent, SessionEvent, WatchEvent
from coord.sm.sessions import Session

QUEUE_LIMIT = 65_536
"""Events a subscriber may fall behind by before its stream is ended (it can resume
from its last revision)."""


def in_range(key: bytes, start: bytes, end: bytes) -> bool:
    if not end:
        return key == start
    if end == b"\0":
        return key >= start
    return start <= key < end


@dataclass(frozen=True)
class Restored:
    """Offered to every KV and owner subscription when this member has restored a snapshot
    (a follower far behind, a member re-added): the revisions the snapshot covers were
    never applied here one by one, so no events came for them. Each stream reads what it
    is owed from the restored machine's history (which the snapshot holds), or says it
    was compacted, as etcd's watchable store resyncs its watchers after a restore."""


@dataclass(eq=False)
class Subscription:
    matches: Callable[[Any], bool]
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    overflowed: bool = False

    def offer(self, event: Any) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            self.queue = asyncio.Queue(1)
            self.queue.put_nowait(None)  # wakes the reader, who sees `overflowed`


class EventHub:
    def __init__(self, machine: CoordMachine) -> None:
        self.machine = machine
        self._kv: set[Subscription] = set()
        self._owners: set[Subscription] = set()
        self._sessions: set[Subscription] = set()
        self._tables: set[TableWatch] = set()
        self.auth_listeners: list[Callable[[AuthEvent], None]] = []
        machine.session_openers.append(self._opened)
        self._kv_store = machine.kv  # another one: a snapshot was restored

    def publish(self) -> None:
        """Called by the node after every batch of applied entries (and after a snapshot
        was restored, before the entries that follow it)."""
        if self.machine.kv is not self._kv_store:
            self._kv_store = self.machine.kv
            for subs in (self._kv, self._owners):
                for sub in subs:
                    sub.offer(Restored())
        tables = self._tables
        for event in self.machine.drain_events():
            for watch in tables:
                watch.offer(event)
            if isinstance(event, WatchEvent):
                subs = self._kv
            elif isinstance(event, OwnershipEvent):
                subs = self._owners
            elif isinstance(event, SessionEvent):
                subs = self._sessions
            else:
                if isinstance(event, AuthEvent):
                    for listener in self.auth_listeners:
                        listener(event)
                continue
            for sub in subs:
                if sub.matches(event):
                    sub.offer(event)
        for watch in tables:
            watch.applied()

    def _opened(self, session: Session) -> None:
        for watch in self._tables:
            watch.opened(session)

    def watch_tables(self, watch: TableWatch) -> TableWatch:
        """Tell `watch` of every event, session opening and applied batch (an inspection
        stream: server/api/table_streams.py) until `unwatch_tables`."""
        self._tables.add(watch)
        return watch

    def unwatch_tables(self, watch: TableWatch) -> None:
        self._tables.discard(watch)

    def broadcast(self, event: Any) -> None:
        """A member-local event (a mode change) for every stream on this member; each
        stream decides what its client is told."""
        for subs in (self._kv, self._owners, self._sessions):
            for sub in subs:
                sub.offer(event)

    def offer_session(self, event: Any) -> None:
        """A member-local event about one session (what became of a local session, see
        local_sessions) for that session's streams on this member."""
        for sub in self._sessions:
            if sub.matches(event):
                sub.offer(event)

    def watch_kv(self, start: bytes, end: bytes) -> Subscription:
        sub = Subscription(lambda e: in_range(e.kv.key, start, end))
        self._kv.add(sub)
        return sub

    def watch_owners(self, group: str, prefix: str) -> Subscription:
        sub = Subscription(lambda e: e.group == group and e.resource.startswith(prefix))
        self._owners.add(sub)
        return sub

    def watch_all_owners(self) -> Subscription:
        """Every group's ownership changes (an operator's console)."""
        sub = Subscription(lambda e: True)
        self._owners.add(sub)
        return sub

    def watch_session(self, session_id: int) -> Subscription:
        sub = Subscription(lambda e: getattr(e, "session_id", session_id) == session_id)
        self._sessions.add(sub)
        return sub

    def cancel(self, sub: Subscription) -> None:
        for subs in (self._kv, self._owners, self._sessions):
            subs.discard(sub)
