"""The key space's history: every change as a `WatchEvent`, oldest first.

Kept apart from the live key space (`coord.sm.kv.KVStore`, which owns one) because the
two have different readers and lifetimes: reads at a past revision and watches starting
in the past read only the history; compaction trims only the history; a get, a range at
the head, a put or a compare never needs it. Each event carries the previous value, so
a key's value at a past revision is the previous value of its first event after it.
`kv_index` keeps where each key's events are, so a watch on a key or a narrow range, or
a read of one at a past revision, finds them by bisection; a range holding many keys
with events scans the history's tail instead when that is fewer steps (`SCAN_FACTOR`).
History is bounded by compaction only: `compact(rev)` forgets events before `rev`, after
which reads and watches below `rev` fail (etcd's rule).
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import chain, islice

from coord.sm import canonical_json, kv_checks, kv_columns
from coord.sm.errors import COMPACTED, FUTURE_REVISION, CommandError
from coord.sm.kv_index import HistoryIndex
from coord.sm.records import PUT, KeyValue, WatchEvent

ALL_KEYS = b"\0"  # as range_end: every key >= key
EVENT_OVERHEAD = 120  # bytes a history event costs beyond the bytes it holds
SCAN_FACTOR = 4
"""A range's history is read by its keys' positions while it has fewer keys with events
than 1/SCAN_FACTOR of the history's tail, else by one pass over the tail: looking a key
up and bisecting its positions costs a few times what testing one event does (`coord
bench machine`'s every-key row times both paths)."""


def _event_bytes(e: WatchEvent) -> int:
    """An event's own bytes: its previous value is a record shared with the event or
    current value before it, so it is counted there."""
    return EVENT_OVERHEAD + len(e.kv.key) + len(e.kv.value)


def in_range(key: bytes, range_end: bytes) -> Callable[[bytes], bool]:
    """etcd range semantics as a predicate."""
    if range_end == b"":
        return lambda k: k == key
    if range_end == ALL_KEYS:
        return lambda k: k >= key
    return lambda k: key <= k < range_end


class KVHistory:
    """The events, their revisions (a parallel list, for bisection), the per-key index
    and the compaction point. Changed only by `record`, `compact` and `load`."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.revs: list[int] = []  # parallel to events, for bisect
        self.index = HistoryIndex()  # where each key's events are in `events`
        # SCAN_FACTOR; the path changes no answer, so a benchmark or a test may set 0 (the
        # index whenever the tail has events) or a huge one (always the scan) to compare
        self.scan_factor = SCAN_FACTOR
        self.compact_revision = 0
        self.compacted = False  # etcd: until the first compaction, even Compact(0) works
        # the estimated memory of the events, kept as they change (derived: not in the
        # snapshot)
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.events)

    def record(self, event: WatchEvent) -> None:
        self.bytes += _event_bytes(event)
        self.events.append(event)
        self.revs.append(event.revision)
        self.index.append(event.kv.key)

    # -- reads ---------------------------------------------------------------------------

    def _indexed_keys(self, key: bytes, range_end: bytes, start: int) -> list[bytes] | None:
        """The range's keys that have events, if finding their events from index `start`
        on by the index is cheaper than a scan of the history from there; else None."""
        lo, hi = ((0, 1) if range_end == b"" else
                  self.index.span(key, None if range_end == ALL_KEYS else range_end))
        if (hi - lo) * self.scan_factor >= len(self.events) - start:
            return None
        return [key] if range_end == b"" else self.index.keys_at(lo, hi)

    def reads_by_index(self, revision: int, key: bytes, range_end: bytes = b"") -> bool:
        """Whether the range's events from `revision` on are found by the index (else by
        a scan): what a benchmark prints beside its timings of both."""
        start = bisect_left(self.revs, revision)
        return self._indexed_keys(key, range_end, start) is not None

    def undo_after(self, revision: int, key: bytes, range_end: bytes,
                   state: dict[bytes, KeyValue | None]) -> None:
        """Turn `state` (the range's current values) into the range as it was at
        `revision`: a key with events since holds the previous value of the first."""
        start = bisect_right(self.revs, revision)
        keys = self._indexed_keys(key, range_end, start)
        if keys is None:  # many keys: undo the later events, newest first
            match = in_range(key, range_end)
            for event in reversed(self.events[start:]):
                if match(event.kv.key):
                    state[event.kv.key] = event.prev_kv
        else:
            for k in keys:
                at = self.index.first(k, start)
                if at is not None:
                    state[k] = self.events[at].prev_kv

    def since(self, revision: int, key: bytes, range_end: bytes) -> tuple[WatchEvent, ...]:
        """Changes at revisions >= `revision` in the range, for a watch starting there
        (CommandError COMPACTED below the compact revision)."""
        if revision < self.compact_revision:
            raise CommandError(
                COMPACTED, f"revision {revision} is compacted (compact revision "
                f"{self.compact_revision}); start at or after it",
                compact_revision=self.compact_revision)
        start = bisect_left(self.revs, revision)
        keys = self._indexed_keys(key, range_end, start)
        if keys is None:  # many keys: one pass over the tail
            match = in_range(key, range_end)
            return tuple(e for e in self.events[start:] if match(e.kv.key))
        since = self.index.since
        at = since(keys[0], start) if len(keys) == 1 else sorted(
            chain.from_iterable(since(k, start) for k in keys))
        return tuple(map(self.events.__getitem__, at))

    def check_read_revision(self, revision: int, head: int) -> None:
        """A read at `revision` (0: now) when the machine is at `head`: not in the
        future, not compacted."""
        if revision > head:
            raise CommandError(FUTURE_REVISION, f"revision {revision} is in the future "
                               f"(current {head})")
        if 0 < revision < self.compact_revision:
            raise CommandError(COMPACTED, f"revision {revision} is compacted (compact "
                               f"revision {self.compact_revision})")

    # -- compaction ----------------------------------------------------------------------

    def compact(self, revision: int, head: int) -> None:
        """Forget history before `revision`, as etcd does: reads at `revision` and watches
        starting there still work (they see the puts that stand at it)."""
        kv_checks.check_int(revision, "revision")
        if self.compacted and revision <= self.compact_revision:
            raise CommandError(COMPACTED, f"revision {revision} is already compacted "
                               f"(compact revision {self.compact_revision})",
                               compact_revision=self.compact_revision)
        if revision > head:
            raise CommandError(FUTURE_REVISION, f"revision {revision} is in the future "
                               f"(current {head})",
                               compact_revision=self.compact_revision)
        cut = bisect_left(self.revs, revision)
        end = bisect_right(self.revs, revision)
        # etcd keeps, of the compact revision, only each key's value as it stands there:
        # its deletes (and puts deleted in the same txn) go with the older history.
        final = {e.kv.key: e for e in self.events[cut:end]}
        kept = [e for e in self.events[cut:end] if e.type == PUT and final[e.kv.key] is e]
        dropped = self.events[:end]
        self.bytes += sum(map(_event_bytes, kept)) - sum(map(_event_bytes, dropped))
        self.events[:end] = kept
        self.revs[:end] = [revision] * len(kept)
        self.index.compact([e.kv.key for e in dropped], [e.kv.key for e in kept])
        self.compact_revision = revision
        self.compacted = True

    # -- snapshot ------------------------------------------------------------------------

    def capture(self) -> dict:
        """The history's fields of the key space's snapshot section, cheaply: a copy of
        the list (the events are frozen), converted later a chunk at a time."""
        history = self.events.copy()
        step = kv_columns.CHUNK
        newest: dict[bytes, KeyValue] = {}  # carried from chunk to chunk, which go in order
        return {
            "compact_revision": self.compact_revision,
            "compacted": self.compacted,
            "history_columns": canonical_json.Lazy(
                range(0, len(history), step),
                lambda at: kv_columns.events_chunk(history[at:at + step], newest),
                slice_len=1),
        }

    def load(self, state: dict, history: list[WatchEvent]) -> None:
        """The history's fields of a snapshot section and its events as read back
        (ValueError if malformed)."""
        compact_revision = state["compact_revision"]
        if type(compact_revision) is not int:
            raise ValueError("bad compact revision")
        compacted = state["compacted"]
        if type(compacted) is not bool:
            raise ValueError("bad compacted flag")
        revs = [e.revision for e in history]
        # Checked pairwise: sorting a copy held a second million-item list at the peak.
        if not all(map(operator.le, revs, islice(revs, 1, None))):
            raise ValueError("KV snapshot out of order")
        self.compact_revision, self.compacted = compact_revision, compacted
        self.events, self.revs = history, revs
        self.index = HistoryIndex(e.kv.key for e in history)
        self.bytes = sum(map(_event_bytes, history))
