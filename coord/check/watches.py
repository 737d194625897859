"""What each watch stream promises on its own, etcd's robustness watch guarantees read
one watch at a time (coord.check.watch_log has the rows): ordered, unique, atomic and
filters honoured. prev_kv is coord.check.watch_prev_kv's; what a watch is owed across
the history (reliable, resumable) coord.check.watch_coverage's; whether the events are
what was written coord.check.watch_history's.

Each check is its own checker (its own verdict), so a run's verdict names the guarantee
that broke; each counts the events it looked at."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.result import CheckResult
from coord.check.watch_log import Event, WatchHistory, read_watches


def watch_result(name: str, h: WatchHistory) -> CheckResult:
    """A watch checker's result, counting the oplog's watches and events; "unknown"
    when no watch delivered anything (nothing was checked)."""
    res = CheckResult(name, stats={"watches": len(h.watches), "events": h.events()})
    if not res.stats["events"]:
        res.verdict, res.reason = "unknown", "no watch delivered an event"
    return res


def check_watch_ordered(rows: Iterable[dict[str, Any]]) -> CheckResult:
    """Revisions never go back along a watch, and the events of one revision (a txn's)
    come to every watch in one order (that of the longest delivery: when two watches
    disagree, either may be the wrong one, and the violation names both)."""
    h = read_watches(rows)
    res = watch_result("watch-ordered", h)
    for w in h.watches:
        for a, b in zip(w.events, w.events[1:], strict=False):
            if b.revision < a.revision:
                res.violation(f"{w.name()}: revision {b.revision} came after {a.revision}",
                              rows=[a.row, b.row])
        for r, evs in w.by_revision().items():
            held = [e.key for e in h.log[r]]
            got = [k for k in dict.fromkeys(e.key for e in evs) if k in held]
            if got != [k for k in held if k in got]:
                res.violation(f"{w.name()}: revision {r}'s events came as {got}, to "
                              f"another watch as {held}", rows=[evs[0].row, h.log[r][0].row])
    return res


def check_watch_unique(rows: Iterable[dict[str, Any]]) -> CheckResult:
    """No event twice on one watch (one key changes once per revision)."""
    h = read_watches(rows)
    res = watch_result("watch-unique", h)
    for w in h.watches:
        seen: dict[tuple[int, str], Event] = {}
        for e in w.events:
            first = seen.setdefault((e.revision, e.key), e)
            if first is not e:
                res.violation(f"{w.name()}: {e.type} of {e.key!r} at revision "
                              f"{e.revision} delivered twice", rows=[first.row, e.row])
    return res


def check_watch_atomic(rows: Iterable[dict[str, Any]]) -> CheckResult:
    """A revision's events come whole, in one response: never split across two, and
    never part of what the watch is owed of it."""
    h = read_watches(rows)
    res = watch_result("watch-atomic", h)
    for w in h.watches:
        for r, evs in w.by_revision().items():
            if len({e.response for e in evs}) > 1:
                res.violation(f"{w.name()}: revision {r} split across responses",
                              rows=[evs[0].row, evs[-1].row])
            got = {e.key for e in evs}
            owed = [e.key for e in h.log[r] if w.wants(e) and e.key not in got]
            if owed:
                res.violation(f"{w.name()}: got part of revision {r}, without {owed}",
                              rows=[evs[0].row])
    return res


def check_watch_filters(rows: Iterable[dict[str, Any]]) -> CheckResult:
    """Only keys in the watched range, and no type of event the watch filtered out
    (NOPUT, NODELETE)."""
    h = read_watches(rows)
    res = watch_result("watch-filters", h)
    for w in h.watches:
        for e in w.events:
            if not w.covers(e.key):
                res.violation(f"{w.name()}: {e.key!r} is outside the watched range",
                              rows=[e.row])
            elif not w.wants(e):
                res.violation(f"{w.name()}: a {e.type} at revision {e.revision} came "
                              f"through its filter {sorted(w.filters)}", rows=[e.row])
    return res
