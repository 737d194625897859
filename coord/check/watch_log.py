"""An oplog's watch traffic, read once for the watch checkers (coord.check.watches,
watch_coverage, watch_history): each watch with the events it delivered, the writes
the events should match, and the revision log every watch saw a part of.

Rows (coord.check.oplog): a `watch` op is one watch stream.
- invoke: `key` and `range_end` (what is watched: `range_end` null is the key alone,
  "\\u0000" every key from `key` on), `start_revision`, `prev_kv` (asked for),
  `filters` (of "noput", "nodelete"), `watcher` (the client that keeps watching: each
  of its watches after the first restarts from the last revision it saw + 1).
- `response` rows, one per message: `revision` (the header's) and `events`, each
  {"type": "put"|"delete", "key", "value", "revision", "prev"}; "prev" (the key's value
  before the event, null if it had none) is there when the watch asked for prev_kv or
  the server sent one anyway.
- completion: ok (the client canceled it), info (the stream broke), fail (never
  created); `compacted`, when the server said so: the compact revision (events before
  it are gone, and the watch is not owed them).
Writes are `write` (value; null = a delete), `cas` ([old, new]), `txn_put` ([[key,
value], ...], one txn: one revision) ops, and coord.chaos.etcd_k8s's `create` (value),
`update` ([mod_revision, new]) and `remove` ([mod_revision, null]); an ok may carry
`revision`, the write's revision when the client reported it. Values are compared as
text (a watch event's value is bytes on the wire). A `compact` op (value: the revision)
that did not fail may have removed the history before its revision from its invoke on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from coord.check.oplog import Op, pair

T = TypeVar("T")
K = TypeVar("K")

PUT, DELETE = "put", "delete"
WRITES = ("write", "cas", "txn_put", "create", "update", "remove")
SWAPS = ("cas", "update", "remove")
"""The writes whose value is [what they compare against, what they write]."""
EVERY_KEY = "\0"


@dataclass(frozen=True, slots=True)
class Event:
    """One event of one watch: where it came (the response's position and row)."""

    type: str
    key: str
    value: str | None
    revision: int
    prev: str | None  # None also when the event carried no prev
    response: int
    row: dict[str, Any] = field(compare=False, repr=False)

    @property
    def time_ns(self) -> int:
        return self.row["time_ns"]


@dataclass
class Watch:
    op: Op
    watcher: str
    start: int  # 0: from whatever the server's revision was
    key: str
    range_end: str | None
    prev_kv: bool
    filters: frozenset[str]
    compacted: int
    events: list[Event]

    def covers(self, key: str) -> bool:
        if not self.range_end:
            return key == self.key
        return key >= self.key and (self.range_end == EVERY_KEY or key < self.range_end)

    def wants(self, e: Event) -> bool:
        """Whether this watch is owed `e` (its range, its filters)."""
        return self.covers(e.key) and f"no{e.type}" not in self.filters

    def owed_from(self) -> int:
        """The first revision this watch is owed: its start (its first event's when it
        started at the server's revision), or the compaction it was told of."""
        first = self.start or (self.events[0].revision if self.events else 0)
        return max(first, self.compacted)

    @property
    def last(self) -> int | None:
        return self.events[-1].revision if self.events else None

    def by_revision(self) -> dict[int, list[Event]]:
        return group(self.events, lambda e: e.revision)

    def name(self) -> str:
        return f"watch {self.watcher}#{self.op.invoke.get('index')} from {self.start}"


@dataclass(frozen=True, slots=True)
class Write:
    op: Op
    key: str
    value: str | None  # None: a delete
    revision: int | None

    @property
    def type(self) -> str:
        return DELETE if self.value is None else PUT


@dataclass
class WatchHistory:
    """`log`: revision -> its events in order, the longest any watch delivered (a watch
    that filters or watches less sees part of a revision); `conflicts`: pairs of events
    two watches disagree on (one revision: a different type or value for one key, or a
    key the longest delivery lacks)."""

    watches: list[Watch]
    writes: dict[str, list[Write]]
    log: dict[int, list[Event]]
    conflicts: list[tuple[Event, Event]]
    compactions: list[Op]

    def compacted(self, revision: int, by_ns: int) -> bool:
        """Whether a compaction sent by `by_ns` may have removed `revision`."""
        return any(c.invoke["value"] > revision and c.start <= by_ns
                   for c in self.compactions)

    def chains(self) -> dict[str, list[Watch]]:
        return group(self.watches, lambda w: w.watcher)

    def events(self) -> int:
        return sum(len(w.events) for w in self.watches)


def group(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """Items by `key`, each list in the items' order."""
    out: dict[K, list[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _events(op: Op) -> list[Event]:
    out = []
    for n, resp in enumerate(op.responses):
        for e in resp.get("value") or ():
            out.append(Event(e["type"], e["key"], _text(e.get("value")), e["revision"],
                             _text(e.get("prev")), n, resp))
    return out


def _watch(op: Op) -> Watch:
    inv = op.invoke
    return Watch(op, str(inv.get("watcher", inv.get("process"))),
                 inv.get("start_revision") or 0, inv["key"], inv.get("range_end"),
                 bool(inv.get("prev_kv")), frozenset(inv.get("filters") or ()),
                 (op.completion or {}).get("compacted") or 0, _events(op))


def _writes(op: Op) -> list[Write]:
    v = op.invoke.get("value")
    revision = op.get("revision") if op.status == "ok" else None
    if op.f == "txn_put":
        return [Write(op, k, _text(x), revision) for k, x in v]
    if op.invoke.get("key") is None:
        return []
    return [Write(op, op.invoke["key"], _text(v[1] if op.f in SWAPS else v), revision)]


def read_watches(rows: Iterable[dict[str, Any]]) -> WatchHistory:
    ops = pair(r for r in rows if r.get("f") in ("watch", "compact", *WRITES))
    watches = [_watch(o) for o in ops if o.f == "watch"]
    writes = group((w for o in ops if o.f in WRITES for w in _writes(o)), lambda w: w.key)
    log: dict[int, list[Event]] = {}
    for w in watches:
        for r, evs in w.by_revision().items():
            if len(evs) > len(log.get(r, ())):
                log[r] = evs
    conflicts = []
    for w in watches:
        for r, evs in w.by_revision().items():
            known = {e.key: e for e in log[r]}
            for e in evs:
                k = known.get(e.key, log[r][0])
                if (k.key, k.type, k.value) != (e.key, e.type, e.value):
                    conflicts.append((k, e))
    return WatchHistory(watches, writes, log, conflicts,
                        [o for o in ops if o.f == "compact" and o.status != "fail"])
