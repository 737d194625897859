"""The history of ownership changes: what lets a WatchOwners start in the past.

A router that reconnects must learn what changed while it was away — including
resources that were freed (released, expired, severed) and so no longer appear in a
listing of current owners. So every ownership change is kept here with its revision,
and `since(revision, ...)` serves a watch that starts at `revision`, as etcd's KV
history serves a KV watch.

The history is bounded two ways, both decided by applied commands only (so every member
keeps exactly the same history, and it lives in the snapshot):
  - KV compaction compacts it too: the cluster has one revision line and one compaction
    revision, so `Compact(rev)` forgets every change at or before `rev`;
  - it never keeps more than `limit` changes of earlier revisions: when it outgrows the
    limit it drops its oldest whole revisions until at most 7/8 of the limit remain (the
    slack keeps trimming amortised instead of a list shift per change). The revision
    being applied is never split, so one huge command may exceed the limit until the
    next command trims it.
Either way `compact_revision` rises to the newest revision dropped, and a watch starting
at or below it is refused with COMPACTED: its replay would be incomplete.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from coord.sm import canonical_json
from coord.sm.errors import COMPACTED, CommandError
from coord.sm.records import OWNERSHIP_KINDS, OwnershipEvent

DEFAULT_HISTORY_LIMIT = 65_536
"""Changes kept (at about 60 bytes each in a snapshot: a few MiB at most)."""


class OwnerHistory:
    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        if type(limit) is not int or limit < 1:
            raise ValueError(f"history limit must be a positive int, got {limit!r}")
        self.limit = limit
        self.compact_revision = 0
        self._events: list[OwnershipEvent] = []
        self._revs: list[int] = []  # parallel to _events, for bisect

    def __len__(self) -> int:
        return len(self._events)

    def extend(self, events: list[OwnershipEvent]) -> None:
        """Record changes (revisions arrive in non-decreasing order), shrinking the
        history exactly as if they came one at a time, so what it keeps does not depend
        on how they were grouped: the events that fit under the limit go in at once; the
        one that takes it past goes in alone and the history shrinks at its revision."""
        done, n = 0, len(events)
        while done < n:
            room = self.limit - len(self._events)
            if room > 0:
                fits = events[done:done + room]
                self._events.extend(fits)
                self._revs.extend([e.revision for e in fits])
                done += len(fits)
                continue
            event = events[done]
            self._events.append(event)
            self._revs.append(event.revision)
            self._shrink(event.revision)
            done += 1

    def _shrink(self, current: int) -> None:
        excess = len(self._events) - (self.limit - self.limit // 8)
        boundary = min(self._revs[excess - 1], current - 1)  # whole revisions, not `current`
        cut = bisect_right(self._revs, boundary)
        if cut:
            self._drop(cut)

    def compact(self, revision: int) -> None:
        """Forget changes at or before `revision` (KV compaction reached it)."""
        self._drop(bisect_right(self._revs, revision))
        self.compact_revision = max(self.compact_revision, revision)

    def _drop(self, cut: int) -> None:
        if cut:
            self.compact_revision = max(self.compact_revision, self._revs[cut - 1])
            del self._events[:cut]
            del self._revs[:cut]

    def since(self, revision: int, group: str, prefix: str = "") -> tuple[OwnershipEvent, ...]:
        """Changes in `group` to resources starting with `prefix` at revisions >=
        `revision`, in revision order; COMPACTED if some of them were forgotten."""
        if revision <= self.compact_revision:
            raise CommandError(
                COMPACTED, f"ownership history at revision {revision} is compacted (compact "
                f"revision {self.compact_revision}); watch from revision 0 for the current "
                "owners, then changes", compact_revision=self.compact_revision)
        start = bisect_left(self._revs, revision)
        return tuple(e for e in self._events[start:]
                     if e.group == group and e.resource.startswith(prefix))

    # -- snapshot ------------------------------------------------------------------------

    def capture(self) -> dict:
        """As KVStore.capture: the events are never changed once made, so a copy of the
        list will do."""
        return {
            "compact_revision": self.compact_revision,
            "events": canonical_json.Lazy(self._events.copy(), _row),
        }

    def load_state(self, state: dict) -> None:
        compact_revision = state["compact_revision"]
        if type(compact_revision) is not int or compact_revision < 0:
            raise ValueError("bad ownership history compact revision")
        events = [_event(row) for row in state["events"]]
        revs = [e.revision for e in events]
        if revs != sorted(revs) or (revs and revs[0] <= compact_revision):
            raise ValueError("ownership history out of order")
        self.compact_revision = compact_revision
        self._events, self._revs = events, revs

    def describe(self) -> dict:
        return {"owner_history": len(self._events),
                "owner_history_compact_revision": self.compact_revision}


def _row(e: OwnershipEvent) -> list:
    return [e.group, e.resource, e.owner, e.generation, e.revision, e.kind]


def _event(row: Any) -> OwnershipEvent:
    if not isinstance(row, list) or len(row) != 6:
        raise ValueError("bad ownership history record")
    group, resource, owner, generation, revision, kind = row
    if type(group) is not str or type(resource) is not str or kind not in OWNERSHIP_KINDS:
        raise ValueError("bad ownership history record")
    if not all(type(x) is int and x >= 0 for x in (owner, generation, revision)):
        raise ValueError("bad ownership history record")
    return OwnershipEvent(group, resource, owner, generation, revision, kind)
