"""What a watch is owed of the history (etcd's robustness guarantees, with
coord.check.watches): reliable (nothing missing between its start revision and its
last event, unless the server said it was compacted) and resumable (a watch restarted
from revision R delivers from R on: nothing again that the client already saw, and
the client's chain of watches leaves no revision out).

What is owed: every revision of the revision log (coord.check.watch_log: what any
watch delivered) in the watch's range and filters, and every acknowledged write whose
answer gave its revision, even one no watch delivered; but not a delete at the very
revision a watch starts from when a compaction at that revision came first (etcd drops
a compacted key's tombstone)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from coord.check.result import CheckResult
from coord.check.watch_log import DELETE, Watch, WatchHistory, read_watches
from coord.check.watches import watch_result


def _tombstone(h: WatchHistory, w: Watch, r: int, types: list[str]) -> bool:
    """Whether revision `r`, where `w` starts, holds only deletes that a compaction at
    `r` sent before `w` may have removed: compacting at R keeps each key's latest
    version at or below R unless that is a delete (etcd drops the tombstone), so a watch
    from R is owed no delete at R."""
    return r == w.owed_from() and all(t == DELETE for t in types) and any(
        c.invoke["value"] == r and c.start <= w.op.start for c in h.compactions)


def check_watch_reliable(rows: Iterable[dict[str, Any]]) -> CheckResult:
    h = read_watches(rows)
    res = watch_result("watch-reliable", h)
    revisions = sorted(h.log)
    acked = sorted(((w.revision, w.key, w) for ws in h.writes.values() for w in ws
                    if w.revision is not None), key=lambda a: a[:2])  # Writes do not compare
    acked_revisions = [a[0] for a in acked]
    for w in h.watches:
        if not w.events:
            continue
        lo = w.owed_from()
        hi = w.last
        got = w.by_revision()
        for r in revisions[bisect_left(revisions, lo):bisect_right(revisions, hi)]:
            owed = [e for e in h.log[r] if w.wants(e)]
            if owed and r not in got and not _tombstone(h, w, r, [e.type for e in owed]):
                res.violation(f"{w.name()}: missed revision {r} ({owed[0].type} of "
                              f"{owed[0].key!r}) before its last event at {hi}",
                              rows=[owed[0].row])
        for r, key, write in acked[bisect_left(acked_revisions, lo):
                                   bisect_right(acked_revisions, hi)]:
            if r in h.log or not w.covers(key) or f"no{write.type}" in w.filters \
                    or _tombstone(h, w, r, [write.type]):
                continue  # a revision some watch delivered is checked above
            res.violation(f"{w.name()}: the acknowledged {write.type} of {key!r} at "
                          f"revision {r} never came, though events up to {hi} did",
                          ops=[write.op.rows()])
    return res


def _resumes_at(prev: Watch) -> int:
    """Where the watch after `prev` should start: after the last revision it saw, or
    where `prev` started if it saw nothing, or at the compaction it was told of."""
    at = prev.last + 1 if prev.last is not None else prev.start
    return max(at, prev.compacted)


def check_watch_resumable(rows: Iterable[dict[str, Any]]) -> CheckResult:
    h = read_watches(rows)
    res = watch_result("watch-resumable", h)
    restarts = 0
    for chain in h.chains().values():
        for prev, w in zip(chain, chain[1:], strict=False):
            restarts += 1
            if w.start and w.start != _resumes_at(prev):
                res.violation(f"{w.name()}: restarted from {w.start}, but the watch before "
                              f"it leaves off at {_resumes_at(prev)}",
                              ops=[prev.op.rows(), w.op.rows()])
        for w in chain:
            early = [e for e in w.events if w.start and e.revision < w.start]
            if early:
                res.violation(f"{w.name()}: delivered revision {early[0].revision}, before "
                              f"the revision it was started from", rows=[early[0].row])
    res.stats["restarts"] = restarts
    return res
