"""The sessions and producer-id tables as streams (Admin.WatchSessions and
Admin.WatchProducers, for consoles): their items, and the cursors that reopen them on
another member.

Each stream starts with a listing (items flagged `snapshot`) ended by an item of kind
"listed", then sends changes. Its position is the Raft log index the serving member had
applied (every member applies the same log; no revision orders these changes). Reopened
after a failure, a stream asks its next member to wait until it has applied that index,
then lists again: a consumer keeps, as for WatchOwnership, the rows a listing names and
drops the rest, so a failover loses no row and repeats none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from coord.client.cursors import Unpinned
from coord.client.errors import CoordError
from coord.client.retry import stream_may_resume
from coord.client.transport import Transport
from coord.v1 import admin_pb2

__all__ = ["BlockDetail", "LeaseDetail", "ProducerChange", "ProducerDetail",
           "SessionChange", "SessionDetail", "TableCursor", "producers_cursor",
           "sessions_cursor", "FirstAt"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionDetail:
    id: int
    name: str = ""
    ttl_ms: int = 0
    read_only_ok: bool = False
    opened_ms: int = 0
    remaining_ms: int = -1  # the leader's deadline when sent; -1: not served by the leader
    owned: tuple[tuple[str, str], ...] = ()  # (group, resource)
    keys: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionChange:
    """`kind`: upsert (the whole row) | ended (`reason` released, expired or severed;
    only `session.id`) | listed (the listing is complete: drop rows it did not name)."""

    kind: str
    session: SessionDetail | None
    snapshot: bool
    index: int  # the log index the serving member had applied
    revision: int
    member: str
    leader: bool  # served by the leader: remaining_ms is known
    reason: str = ""


class BlockDetail(NamedTuple):
    requester: str
    start: int
    size: int
    revision: int


class LeaseDetail(NamedTuple):
    pid: int
    epoch: int
    expire_ms: int  # leader wall time (compare with `clock_ms`)
    topic: str
    partition: int


class ProducerDetail(NamedTuple):
    producer_key: str
    pid: int
    epoch: int


@dataclass(frozen=True, slots=True)
class ProducerChange:
    """`kind`: block | lease | producer (the row in `row`; `removed`: drop it) | listed."""

    kind: str
    row: BlockDetail | LeaseDetail | ProducerDetail | None
    snapshot: bool
    removed: bool
    next_pid: int
    clock_ms: int
    revision: int
    index: int


def session_change(r: admin_pb2.SessionChange) -> SessionChange:
    s = r.session
    detail = None if r.kind == "listed" else SessionDetail(
        s.id, s.name, s.ttl_ms, s.read_only_ok, s.opened_ms, s.remaining_ms,
        tuple((h.group, h.resource) for h in s.owned), tuple(s.keys))
    return SessionChange(r.kind, detail, r.snapshot, r.index, r.revision, r.member,
                         r.leader, r.reason)


def producer_change(r: admin_pb2.ProducerChange) -> ProducerChange:
    row: BlockDetail | LeaseDetail | ProducerDetail | None = None
    if r.kind == "block":
        b = r.block
        row = BlockDetail(b.requester, b.start, b.size, b.revision)
    elif r.kind == "lease":
        x = r.lease
        row = LeaseDetail(x.pid, x.epoch, x.expire_ms, x.topic, x.partition)
    elif r.kind == "producer":
        p = r.producer
        row = ProducerDetail(p.producer_key, p.pid, p.epoch)
    return ProducerChange(r.kind, row, r.snapshot, r.removed, r.next_pid, r.clock_ms,
                          r.revision, r.index)


class TableCursor(Unpinned, Generic[T]):
    """A WatchSessions or WatchProducers position: the highest log index received."""

    service = "Admin"

    def __init__(self, method: str, request: Callable[[int], Any],
                 convert: Callable[[Any], T], after_index: int = 0) -> None:
        self.method = method
        self._request = request
        self._convert = convert
        self.index = after_index

    def request(self) -> Any:
        return self._request(self.index)

    def feed(self, response: Any) -> list[T]:
        self.index = max(self.index, response.index)
        return [self._convert(response)]

    def on_error(self, err: CoordError) -> bool:
        return stream_may_resume(err)


def sessions_cursor(after_index: int = 0) -> TableCursor[SessionChange]:
    return TableCursor("WatchSessions",
                       lambda i: admin_pb2.WatchSessionsRequest(after_index=i),
                       session_change, after_index)


def producers_cursor(after_index: int = 0) -> TableCursor[ProducerChange]:
    return TableCursor("WatchProducers",
                       lambda i: admin_pb2.WatchProducersRequest(after_index=i),
                       producer_change, after_index)


class FirstAt:
    """A client link whose first stream opens at `endpoint` (the leader: only it knows
    how long sessions have left), and whose reopens go round the client's ring."""

    def __init__(self, client: Any, endpoint: str) -> None:
        self._client = client
        self._endpoint: str | None = endpoint

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def current(self) -> tuple[int, Transport]:
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is None:
            return self._client.current()
        ring = self._client.ring.endpoints
        # index -1 when not in the ring (a learner): its failure rotates nothing
        index = ring.index(endpoint) if endpoint in ring else -1
        return index, self._client.transport(endpoint)
