"""prev_kv correct (an etcd robustness watch guarantee): sent only when asked, and
then the key as it stood at the revision before the event.

What it stood as is known exactly only where the history is known: the latest
revision before the event that touched the key (from the revision log or an
acknowledged write's answer, coord.check.watch_log), provided some watch with no
filter delivered everything on that key between that revision and the event (else a
revision no watch delivered, compacted away, say, may have changed it). Elsewhere a
prev must at least be a value some write sent to the key. None is also right when the
revision before the event may have been compacted by the time it came (etcd then has
no prev to send)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from coord.check.result import CheckResult
from coord.check.watch_log import DELETE, Watch, WatchHistory, group, read_watches
from coord.check.watches import watch_result

State = tuple[int, str | None, dict[str, Any]]
"""(revision, the value it left the key holding (None: absent), the row that shows it)"""


def _states(h: WatchHistory) -> dict[str, list[State]]:
    """Per key, what each known revision left it holding, in revision order."""
    known: dict[str, dict[int, tuple[str | None, dict[str, Any]]]] = {}
    for r, events in h.log.items():
        for e in events:
            known.setdefault(e.key, {})[r] = (None if e.type == DELETE else e.value, e.row)
    for key, writes in h.writes.items():
        for w in writes:
            if w.revision is not None:
                known.setdefault(key, {}).setdefault(w.revision, (w.value, w.op.invoke))
    return {k: sorted(((r, v, row) for r, (v, row) in d.items()), key=lambda s: s[0])
            for k, d in known.items()}


class _Coverage:
    """Which spans of revisions some unfiltered watch delivered whole: per watched
    range, the watches' (first owed, last) spans, by first, with the running maximum
    of the last (one bisect per question)."""

    def __init__(self, watches: list[Watch]) -> None:
        self.ranges: list[tuple[Watch, list[int], list[int]]] = []
        whole = (w for w in watches if not w.filters and w.events)
        for same in group(whole, lambda w: (w.key, w.range_end)).values():
            spans = sorted((w.owed_from(), w.last or 0) for w in same)
            reach, ends = 0, []
            for _, last in spans:
                reach = max(reach, last)
                ends.append(reach)
            self.ranges.append((same[0], [s[0] for s in spans], ends))

    def whole(self, key: str, lo: int, hi: int) -> bool:
        """Whether one watch delivered everything on `key` from `lo` to `hi`."""
        if lo > hi:
            return True
        for w, firsts, ends in self.ranges:
            i = bisect_right(firsts, lo)
            if w.covers(key) and i and ends[i - 1] >= hi:
                return True
        return False


def check_watch_prev_kv(rows: Iterable[dict[str, Any]]) -> CheckResult:
    h = read_watches(rows)
    res = watch_result("watch-prev-kv", h)
    states = _states(h)
    revisions = {k: [s[0] for s in ss] for k, ss in states.items()}
    coverage = _Coverage(h.watches)
    for w in h.watches:
        for e in w.events:
            if not w.prev_kv:
                if e.prev is not None:
                    res.violation(f"{w.name()}: prev_kv {e.prev!r} sent unasked at "
                                  f"revision {e.revision}", rows=[e.row])
                continue
            if e.prev is None and h.compacted(e.revision - 1, e.time_ns):
                continue
            i = bisect_left(revisions.get(e.key, []), e.revision)
            if i and coverage.whole(e.key, states[e.key][i - 1][0] + 1, e.revision - 1):
                r, want, row = states[e.key][i - 1]
                if e.prev != want:
                    res.violation(f"{w.name()}: {e.key!r} at revision {e.revision} has "
                                  f"prev {e.prev!r}, but revision {r} left {want!r}",
                                  rows=[row, e.row])
            elif e.prev is not None and e.prev not in {
                    x.value for x in h.writes.get(e.key, ())}:
                res.violation(f"{w.name()}: {e.key!r} at revision {e.revision} has prev "
                              f"{e.prev!r}, which nobody wrote", rows=[e.row])
    return res
