"""The native session event stream (coord.chaos.session_watch has the rows) held to the
watch guarantees and to the history: ordered (revisions never go back), unique (no
event twice), one end (released, expired or severed: exactly one once the session was
ended, and nothing after it), reliable (a session whose close was acknowledged hears
`released`, one a takeover severed hears `severed`, unless the client said `gone`: it
learned of the end without the event, its stream broken; a stream the client stopped
waiting on before any end came is unknown, and counted), and true to the history (the end
is the one its ending caused, at the revision the close or the takeover's answer gave,
naming the new owner and its generation; and, if it held its resource, every owners
stream that covers that revision shows the resource freed or taken there)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.oplog import Op, pair
from coord.check.owner_stream import read_streams
from coord.check.result import CheckResult

ENDS = ("released", "expired", "severed")


def _events(op: Op) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(event, its row), the client's own `gone` left out (no revision: not the server's)."""
    return [(e, r) for r in op.responses for e in r.get("value") or () if e["type"] != "gone"]


def _ender(op: Op, ops: list[Op]) -> Op | None:
    """The acknowledged op that ended the session: its close, or the takeover of its
    resource (an own with a generation, by another session, after the stream began)."""
    session = op.invoke["session"]
    for o in ops:
        if o.status != "ok" or o.start < op.start:
            continue
        if o.f == "close_session" and o.invoke.get("session") == session:
            return o
        if o.f == "own" and o.invoke.get("generation") is not None \
                and o.invoke.get("resource") == op.invoke["resource"] \
                and o.invoke.get("session") != session and o.start <= op.end:
            return o
    return None


def _expected(ender: Op) -> dict[str, Any]:
    if ender.f == "close_session":
        return {"type": "released", "revision": ender.get("revision")}
    return {"type": "severed", "revision": ender.get("revision"),
            "new_owner": ender.invoke["session"], "generation": ender.get("generation")}


def check_session_events(rows: Iterable[dict[str, Any]]) -> CheckResult:
    rows = list(rows)
    ops = pair(r for r in rows if r.get("f") in ("session_events", "own", "close_session"))
    owners, _ = read_streams(rows)
    streams = [o for o in ops if o.f == "session_events"]
    res = CheckResult("session-events", stats={"streams": len(streams), "events": 0,
                                                "ends": 0, "gone": 0, "undrained": 0})
    for op in streams:
        name = f"session {op.invoke['session']}'s events"
        events = _events(op)
        res.stats["events"] += len(events)
        seen: set[tuple] = set()
        for (a, ra), (b, rb) in zip(events, events[1:], strict=False):
            if b["revision"] < a["revision"]:
                res.violation(f"{name}: revision {b['revision']} came after "
                              f"{a['revision']}", rows=[ra, rb])
        for e, r in events:
            k = tuple(sorted(e.items()))
            if k in seen:
                res.violation(f"{name}: {e['type']} at revision {e['revision']} delivered "
                              f"twice", rows=[r])
            seen.add(k)
        ends = [(e, r) for e, r in events if e["type"] in ENDS]
        if len(ends) > 1:
            res.violation(f"{name}: ended twice ({ends[0][0]['type']}, then "
                          f"{ends[1][0]['type']})", rows=[ends[0][1], ends[1][1]])
        if ends and ends[0] != events[-1]:
            res.violation(f"{name}: an event after its {ends[0][0]['type']}",
                          rows=[ends[0][1], events[-1][1]])
        ender = _ender(op, ops)
        if ender is not None and op.status == "info":
            res.stats["undrained"] += 1  # no end came in the client's wait: unknown
        if ender is None or op.status != "ok":
            continue
        want = _expected(ender)
        if not ends and any(e["type"] == "gone" for r in op.responses
                            for e in r.get("value") or ()):
            res.stats["gone"] += 1  # the client said it learned the end without its why
            continue
        if not ends:
            res.violation(f"{name}: no {want['type']} event, though its "
                          f"{ender.f.replace('_', ' ')} was acknowledged",
                          ops=[op.rows(), ender.rows()])
            continue
        res.stats["ends"] += 1
        end, row = ends[0]
        wrong = {k: (end.get(k), v) for k, v in want.items() if end.get(k) != v}
        if wrong:
            res.violation(f"{name}: {end['type']} at revision {end['revision']}, but its "
                          f"{ender.f.replace('_', ' ')} said " + ", ".join(
                              f"{k} {v!r}" for k, (_, v) in wrong.items()),
                          rows=[row], ops=[ender.rows()])
            continue
        resource = op.invoke["resource"]
        held = any(o.f == "own" and o.status == "ok" and o.invoke.get("resource") == resource
                   and o.invoke.get("session") == op.invoke["session"] for o in ops)
        for s in owners if held else ():  # holding nothing, its end changes no owner
            if s.op.invoke.get("key") != op.invoke["key"] or not s.changes \
                    or not s.start <= end["revision"] <= s.changes[-1].revision:
                continue
            there = [c for c in s.changes if c.revision == end["revision"]
                     and c.resource == resource]
            if not there:
                res.violation(f"{name}: {end['type']} at revision {end['revision']}, but "
                              f"{s.name()} shows no change of {resource!r} there",
                              rows=[row], ops=[s.op.rows()])
    if not res.stats["events"]:
        res.verdict, res.reason = "unknown", "no session stream delivered an event"
    return res
