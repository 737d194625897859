"""Every watch event is what the history says was written: a put of a value some write
or cas sent to that key (sent before the event arrived, not one that failed), at the
revision the write's answer gave when it gave one; a delete some delete of that key
sent; no write applied at two revisions; watches that agree on every revision; and
revisions in the real-time order of the writes (a write acknowledged before another
was sent has the lower revision).

Values are unique per write in the chaos workloads, so a put event names its write;
deletes carry no value and are matched by key (and revision, when known)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.oplog import INFINITY
from coord.check.result import CheckResult
from coord.check.watch_log import PUT, Event, Watch, Write, read_watches
from coord.check.watches import watch_result


def _source(e: Event, writes: list[Write]) -> tuple[Write | None, str]:
    """The write `e` shows, or why none can be: (None, what is wrong)."""
    same = [w for w in writes if w.type == e.type and (e.type != PUT or w.value == e.value)]
    what = f"{e.type} of {e.key!r}" + (f" = {e.value!r}" if e.type == PUT else "")
    if not same:
        return None, f"a {what} nobody sent"
    live = [w for w in same if w.op.status != "fail"]
    if not live:
        return None, f"a {what} whose write failed (did nothing)"
    sent = [w for w in live if w.op.start <= e.time_ns]
    if not sent:
        return None, f"a {what} that arrived before its write was sent"
    at = [w for w in sent if w.revision in (None, e.revision)]
    if not at:
        return None, f"a {what} at revision {e.revision}, but its write's answer said " \
                     f"revision {sent[0].revision}"
    return at[0], ""


def _distinct(watches: list[Watch]) -> list[Event]:
    """Every event any watch delivered, once (the first delivery), by revision."""
    seen: dict[tuple, Event] = {}
    for w in watches:
        for e in w.events:
            seen.setdefault((e.revision, e.key, e.type, e.value), e)
    return sorted(seen.values(), key=lambda e: e.revision)


def check_watch_history(rows: Iterable[dict[str, Any]]) -> CheckResult:
    h = read_watches(rows)
    res = watch_result("watch-history", h)
    for a, b in h.conflicts:
        res.violation(f"watches disagree on revision {b.revision}: {a.type} of {a.key!r} = "
                      f"{a.value!r} against {b.type} of {b.key!r} = {b.value!r}",
                      rows=[a.row, b.row])
    applied: dict[int, tuple[int, Write]] = {}  # id(put's write) -> (revision, write)
    for e in _distinct(h.watches):
        write, wrong = _source(e, h.writes.get(e.key, []))
        if write is None:
            res.violation(f"revision {e.revision}: {wrong}", rows=[e.row])
            continue
        if e.type != PUT:
            continue
        first = applied.setdefault(id(write), (e.revision, write))
        if first[0] != e.revision:
            res.violation(f"{e.key!r} = {e.value!r} applied at revisions {first[0]} and "
                          f"{e.revision}", rows=[e.row], ops=[write.op.rows()])
    # Real time: along the revisions, no write may have completed before one at an
    # earlier revision was sent.
    latest: Write | None = None  # the latest-sent write at the revisions so far
    for r, w in sorted(applied.values(), key=lambda a: a[0]):
        if latest is not None and w.op.end < latest.op.start and w.op.end != INFINITY:
            res.violation(f"the write at revision {r} was acknowledged before the write "
                          f"at an earlier revision was sent", ops=[latest.op.rows(),
                                                                   w.op.rows()])
        if latest is None or w.op.start > latest.op.start:
            latest = w
    res.stats["revisions"] = len(h.log)
    return res
