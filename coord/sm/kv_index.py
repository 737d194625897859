"""Where each key's events are in the KV history (etcd's `treeIndex`).

A read at a past revision needs, for each key of its range, the key's first event after
that revision (whose previous record is the key's value then); a watch starting at a
revision needs the key's events from there on. A scan of the history's tail finds both
in O(history) however few of those events are the key's: a watch started a million
revisions back read a million events to return ten. Here each key keeps the positions
of its events, oldest first, so both are a bisect: O(log n) in the history's size, plus
what is returned.

Positions are absolute: the first event ever recorded is 0, and compaction, which drops
a prefix of the history and thins out the events of the compact revision, moves the
base instead of renumbering what stays (only the keys it touched change). A key with one
event holds its position as an int; one with more, an `array('q')` — 8 bytes an event,
no int object each. The index is derived from the history, so a snapshot does not hold
it: a restore rebuilds it from the restored history (`HistoryIndex(keys)`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence

from sortedcontainers import SortedList

__all__ = ["HistoryIndex"]


class HistoryIndex:
    """The positions of each key's events in a history (a list whose item i is at
    absolute position `base + i`). Methods take and give list indices."""

    def __init__(self, keys: Iterable[bytes] = ()) -> None:
        """The index of a history whose events' keys are `keys`, oldest first. Built by
        C loops where it can (a restore of a long history waits for it): each key's last
        position, then, if some key has several, every key's positions from one stable
        sort of the positions by key."""
        keys = list(keys)
        n = len(keys)
        positions: dict[bytes, int | array] = dict(zip(keys, range(n), strict=True))
        ordered = sorted(positions)
        if len(positions) < n:
            by_key = sorted(range(n), key=keys.__getitem__)  # stable: positions ascend
            counts = Counter(keys)
            at = 0
            for key in ordered:
                count = counts[key]
                if count > 1:
                    positions[key] = array("q", by_key[at:at + count])
                at += count
        self._base = 0  # the absolute position of the history's first event
        self._end = n  # the absolute position the next event will have
        self._positions = positions
        self._keys = SortedList(ordered)  # the keys with events, for ranges

    def __len__(self) -> int:
        """The events indexed: the history's length."""
        return self._end - self._base

    def append(self, key: bytes) -> None:
        """Note the event just appended to the history, on `key`."""
        position = self._end
        self._end = position + 1
        at = self._positions.get(key)
        if at is None:
            self._positions[key] = position
            self._keys.add(key)
        elif type(at) is int:
            self._positions[key] = array("q", (at, position))
        else:
            at.append(position)

    def since(self, key: bytes, start: int) -> list[int]:
        """The indices of `key`'s events at or after index `start`, in order."""
        at = self._positions.get(key)
        base = self._base
        if at is None:
            return []
        if type(at) is int:
            return [at - base] if at - base >= start else []
        return [p - base for p in at[bisect_left(at, base + start):]]

    def first(self, key: bytes, start: int) -> int | None:
        """The index of `key`'s first event at or after index `start`, if any."""
        at = self._positions.get(key)
        base = self._base
        if at is None:
            return None
        if type(at) is int:
            return at - base if at - base >= start else None
        i = bisect_left(at, base + start)
        return at[i] - base if i < len(at) else None

    def span(self, low: bytes, high: bytes | None) -> tuple[int, int]:
        """Where the keys with events `low <= k < high` (None: no bound) are among all
        keys with events, in O(log n): their count is the difference."""
        lo = self._keys.bisect_left(low)
        hi = len(self._keys) if high is None else self._keys.bisect_left(high)
        return lo, max(lo, hi)

    def keys_at(self, lo: int, hi: int) -> list[bytes]:
        """The keys with events from sorted position `lo` to `hi` (a `span`)."""
        return list(self._keys.islice(lo, hi)) if hi > lo else []

    def compact(self, dropped: Sequence[bytes], kept: Sequence[bytes]) -> None:
        """The history's first `len(dropped)` events (on keys `dropped`) were replaced by
        events on `kept`, in that order, each key once and each one of `dropped`'s."""
        end = self._base + len(dropped)  # positions below it are gone
        base = end - len(kept)  # the kept events take the last positions of the dropped
        fresh = {key: base + i for i, key in enumerate(kept)}
        for key in set(dropped):
            at = self._positions[key]
            new = fresh.get(key)
            gone = 1 if type(at) is int else bisect_left(at, end)
            count = (1 if type(at) is int else len(at)) - gone + (new is not None)
            if count == 0:
                del self._positions[key]
                self._keys.remove(key)
            elif count == 1:
                self._positions[key] = new if new is not None else at[-1]  # type: ignore[index]
            else:  # at is an array: several positions stay
                del at[:gone]  # type: ignore[index]
                if new is not None:
                    at.insert(0, new)  # type: ignore[union-attr]
        self._base = base
