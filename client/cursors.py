"""Positions in server streams, so a stream can be reopened on another member.

A watch (KV or owners) is a read that may outlive the member serving it. Its cursor
remembers what was delivered and builds the request that resumes there, dropping what a
resumed stream repeats, so a failover loses nothing and repeats nothing. The cursors
are pure bookkeeping; `AsyncStream` does the I/O.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from google.protobuf.message import Message

from coord.client.calls import Call, range_call, range_request
from coord.client.errors import CompactedError, CoordError
from coord.client.results import (
    KeyValue,
    OwnerChange,
    RangeResult,
    WatchEvent,
    owner_change,
    watch_event,
)
from coord.client.retry import stream_may_resume
from coord.v1 import coord_pb2 as pb

__all__ = ["Cursor", "OwnersCursor", "Unpinned", "WatchCursor"]

T = TypeVar("T")


class Cursor(Protocol[T]):
    """Position in a server stream, so it can be reopened on another member."""

    service: str
    method: str

    def start_call(self) -> Call[Any] | None:
        """A read to run before the first open (None: nothing to resolve)."""

    def started(self, result: Any) -> None: ...

    def request(self) -> Message: ...

    def feed(self, response: Any) -> list[T]:
        """Items to deliver from one response (repeats after a resume are dropped)."""

    def on_error(self, err: CoordError) -> bool:
        """True: reopen the stream; False: the error goes to the caller."""


class Unpinned:
    """For a cursor whose stream has nothing to resolve before its first open."""

    def start_call(self) -> None:
        return None

    def started(self, result: Any) -> None:
        return None


class _DropsRepeats:
    """For a stream resumed AT its last delivered revision (a revision's changes may span
    responses, so resuming at revision + 1 could lose some): what the resumed stream
    repeats of that revision is dropped. The cursor sets `last_revision` and
    `_seen_at_last` (the keys delivered at it)."""

    last_revision: int
    _seen_at_last: set[Any]

    def _is_new(self, revision: int, key: Any) -> bool:
        """Whether the change to `key` at `revision` is not delivered yet (it is now)."""
        if revision < self.last_revision or (
                revision == self.last_revision and key in self._seen_at_last):
            return False
        if revision > self.last_revision:
            self.last_revision, self._seen_at_last = revision, set()
        self._seen_at_last.add(key)
        return True


class WatchCursor(_DropsRepeats):
    """A KV watch's position. `from_revision` 0 (changes from now on) is pinned first to
    the current revision + 1 by a read, so a reconnect cannot skip changes made between
    the read and the reopen. A reopened watch starts again AT the last delivered
    revision, and drops that revision's events it already delivered: a revision's events
    may span responses, so resuming at revision + 1 could lose some."""

    service = "KV"
    method = "Watch"

    def __init__(
        self, key: bytes, range_end: bytes, from_revision: int = 0, prev_kv: bool = False
    ) -> None:
        self.key = key
        self.range_end = range_end
        self.prev_kv = prev_kv
        self.next_revision = from_revision
        self.last_revision = 0
        self._seen_at_last: set[bytes] = set()

    def start_call(self) -> Call[RangeResult] | None:
        if self.next_revision > 0 or self.last_revision > 0:
            return None
        return range_call(range_request(self.key, self.range_end or None, limit=1))

    def started(self, result: RangeResult) -> None:
        self.next_revision = result.header.revision + 1

    def request(self) -> pb.WatchRequest:
        return pb.WatchRequest(
            key=self.key, range_end=self.range_end, prev_kv=self.prev_kv,
            from_revision=self.last_revision or self.next_revision,
        )

    def feed(self, response: pb.WatchResponse) -> list[WatchEvent]:
        if response.compact_revision:
            raise CompactedError(
                "COMPACTED",
                f"watch revision {self.last_revision or self.next_revision} is compacted "
                f"(compact revision {response.compact_revision}); re-read and watch again",
                metadata={"compact_revision": str(response.compact_revision)},
            )
        if response.mode:
            rev = max(self.last_revision, self.next_revision - 1)
            return [WatchEvent("MODE", KeyValue(b"", b"", mod_revision=rev), mode=response.mode)]
        events = map(watch_event, response.events)
        return [ev for ev in events if self._is_new(ev.revision, ev.kv.key)]

    def on_error(self, err: CoordError) -> bool:
        return stream_may_resume(err)


class OwnersCursor(Unpinned, _DropsRepeats):
    """A WatchOwners position. `from_revision` > 0 replays every change since then (the
    server keeps a bounded history; a compacted start raises CompactedError); 0 starts
    with a listing of the current owners. Before the first change it resumes where it
    began (a listing again gives snapshot entries again: consumers should treat them as
    "current state"); after, it resumes at the last change's revision, which the server
    replays, and drops the changes it already delivered. If that history is compacted
    and the watch began with a listing, it starts over with one."""

    service = "Ownership"
    method = "WatchOwners"

    def __init__(self, group: str, prefix: str = "", from_revision: int = 0) -> None:
        self.group = group
        self.prefix = prefix
        self.from_revision = from_revision
        self.last_revision = 0
        self._seen_at_last: set[str] = set()

    def request(self) -> pb.WatchOwnersRequest:
        return pb.WatchOwnersRequest(
            group=self.group, prefix=self.prefix,
            from_revision=self.last_revision or self.from_revision,
        )

    def feed(self, response: pb.OwnerChange) -> list[OwnerChange]:
        change = owner_change(response)
        if change.snapshot or change.mode:
            return [change]
        return [change] if self._is_new(change.owner.revision, change.owner.resource) else []

    def on_error(self, err: CoordError) -> bool:
        if isinstance(err, CompactedError) and self.from_revision == 0 and self.last_revision:
            self.last_revision = 0
            self._seen_at_last = set()
            return True
        return stream_may_resume(err)
