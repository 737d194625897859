"""The native ownership stream (coord.chaos.owner_watch has the rows) held to etcd's
watch guarantees, as coord.check.watches holds etcd watches: ordered (revisions never
go back along a stream), unique (no change twice on one stream), reliable (every
acknowledged grant at or after the stream's from_revision, up to its last change, came)
and true to the history (every grant a stream shows was asked for by that session, with
the generation and revision its answer gave, and a resource's generations rise along a
stream).

Changes of one revision share it (a command that ends a session frees all it held), so
order is checked between revisions; a change is (kind, resource, session, generation,
revision)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coord.check.oplog import Op, pair
from coord.check.result import CheckResult
from coord.check.watch_log import group

FREES = ("release", "expire", "sever")


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    resource: str
    session: int
    generation: int
    revision: int
    row: dict[str, Any] = field(compare=False, repr=False)

    @property
    def is_grant(self) -> bool:
        return self.session != 0 and self.kind not in FREES


@dataclass
class OwnerStream:
    op: Op
    start: int
    changes: list[Change]

    def name(self) -> str:
        return (f"owners stream {self.op.invoke.get('watcher')}#"
                f"{self.op.invoke.get('index')} from {self.start}")


def read_streams(rows: Iterable[dict[str, Any]]) -> tuple[list[OwnerStream], list[Op]]:
    """The `watch_owners` streams and the `own` ops."""
    ops = pair(r for r in rows if r.get("f") in ("watch_owners", "own"))
    streams = [OwnerStream(o, o.invoke.get("from_revision") or 0,
                           [Change(c["kind"], c["resource"], c["session"], c["generation"],
                                   c["revision"], resp)
                            for resp in o.responses for c in resp.get("value") or ()])
               for o in ops if o.f == "watch_owners"]
    return streams, [o for o in ops if o.f == "own"]


def _result(name: str, streams: list[OwnerStream]) -> CheckResult:
    res = CheckResult(name, stats={"streams": len(streams),
                                   "changes": sum(len(s.changes) for s in streams)})
    if not res.stats["changes"]:
        res.verdict, res.reason = "unknown", "no owners stream delivered a change"
    return res


def check_owners_ordered(rows: Iterable[dict[str, Any]]) -> CheckResult:
    streams, _ = read_streams(rows)
    res = _result("owners-ordered", streams)
    for s in streams:
        for a, b in zip(s.changes, s.changes[1:], strict=False):
            if b.revision < a.revision:
                res.violation(f"{s.name()}: revision {b.revision} came after {a.revision}",
                              rows=[a.row, b.row])
        early = [c for c in s.changes if c.revision < s.start]
        if early:
            res.violation(f"{s.name()}: a change at revision {early[0].revision}, before "
                          f"the revision it was started from", rows=[early[0].row])
    return res


def check_owners_unique(rows: Iterable[dict[str, Any]]) -> CheckResult:
    streams, _ = read_streams(rows)
    res = _result("owners-unique", streams)
    for s in streams:
        seen: dict[Change, Change] = {}
        for c in s.changes:
            first = seen.setdefault(c, c)
            if first is not c:
                res.violation(f"{s.name()}: {c.kind} of {c.resource!r} (session {c.session}, "
                              f"generation {c.generation}) at revision {c.revision} "
                              f"delivered twice", rows=[first.row, c.row])
    return res


def _grants(owns: list[Op]) -> list[Op]:
    return [o for o in owns if o.status == "ok" and o.get("revision") is not None]


def check_owners_reliable(rows: Iterable[dict[str, Any]]) -> CheckResult:
    streams, owns = read_streams(rows)
    res = _result("owners-reliable", streams)
    acked = _grants(owns)
    for s in streams:
        if not s.changes:
            continue
        last = s.changes[-1].revision
        got = {(c.resource, c.generation, c.revision) for c in s.changes if c.is_grant}
        group_name = s.op.invoke.get("key")
        for o in acked:
            at = (o.get("resource"), o.get("generation"), o.get("revision"))
            if o.get("group") == group_name and s.start <= at[2] <= last and at not in got:
                res.violation(f"{s.name()}: the acknowledged grant of {at[0]!r} (generation "
                              f"{at[1]}) at revision {at[2]} never came, though changes up "
                              f"to {last} did", ops=[o.rows()])
    return res


def check_owners_history(rows: Iterable[dict[str, Any]]) -> CheckResult:
    streams, owns = read_streams(rows)
    res = _result("owners-history", streams)
    asked = group(owns, lambda o: (o.get("session"), o.get("resource")))
    for s in streams:
        generation: dict[str, Change] = {}
        for c in s.changes:
            if not c.is_grant:
                continue
            mine = [o for o in asked.get((c.session, c.resource), ())
                    if o.status != "fail" and o.start <= c.row["time_ns"]]
            if not any(o.status == "info" or (o.get("generation"), o.get("revision")) ==
                       (c.generation, c.revision) for o in mine):
                res.violation(f"{s.name()}: {c.resource!r} granted to session {c.session} "
                              f"(generation {c.generation}) at revision {c.revision}, which "
                              f"no own of that session was answered with",
                              rows=[c.row], ops=[o.rows() for o in mine[:3]])
            before = generation.get(c.resource)
            if before is not None and before.revision < c.revision \
                    and before.generation >= c.generation:
                res.violation(f"{s.name()}: {c.resource!r} granted at generation "
                              f"{c.generation} (revision {c.revision}) after generation "
                              f"{before.generation} (revision {before.revision})",
                              rows=[before.row, c.row])
            generation[c.resource] = c
    return res
