"""Kubernetes-shaped traffic's checks (coord.chaos.etcd_k8s has the rows): what an
informer lists and caches, and what a controller's compare-and-swap did, against the
history's state of each key.

The history of a key is every write to it known at a revision: the watch events (any
watch's; coord.check.watch_history holds them to the writes), the acknowledged writes
with their revisions, and the list entries (a key at its mod_revision). Its state at
revision R is its latest known write at or below R.

- informer-cache: each list at revision R equals the history's state at R, and each
  informer's cache rebuilt from a list and the chain of watches after it (each event
  applied in order) equals the history's state at the chain's last revision. A key the
  history still has that the snapshot lacks is excused only by a delete of it whose
  outcome is unknown (it may have happened unseen).
- k8s-cas: an update or delete that succeeded against mod_revision M at revision N had
  no known write of its key between M and N; a create that succeeded found its key
  absent (or a delete of it whose outcome is unknown was sent before it completed); a
  compare the server said failed did not hold (the txn's failure branch read the key in
  the same revision)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coord.check.oplog import Op, pair
from coord.check.result import CheckResult
from coord.check.watch_log import DELETE, WatchHistory, read_watches

SWAPS = ("update", "remove")


@dataclass
class KeyHistory:
    """One key's known writes: revision -> value (None: deleted), and where each was
    first learned (a row, for the violation's evidence). `revisions` is the sorted keys
    of `values` once known_writes has read everything."""

    values: dict[int, str | None]
    rows: dict[int, dict[str, Any]]
    revisions: list[int] = field(default_factory=list)

    def at(self, revision: int) -> tuple[int, str | None] | None:
        """(revision, value) of the latest known write at or below `revision`."""
        i = bisect_right(self.revisions, revision)
        return (self.revisions[i - 1], self.values[self.revisions[i - 1]]) if i else None

    def between(self, lo: int, hi: int) -> list[int]:
        return self.revisions[bisect_right(self.revisions, lo):bisect_left(self.revisions, hi)]


@dataclass
class Snapshot:
    """What a list or an informer's cache held at `revision`: key -> (value, mod)."""

    what: str
    revision: int
    prefix: str
    by_ns: int
    objects: dict[str, tuple[str, int]]
    row: dict[str, Any]


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def known_writes(h: WatchHistory, lists: list[Op]) -> dict[str, KeyHistory]:
    out: dict[str, KeyHistory] = {}

    def learn(key: str, revision: int, value: str | None, row: dict[str, Any]) -> None:
        kh = out.setdefault(key, KeyHistory({}, {}))
        if revision not in kh.values:
            kh.values[revision], kh.rows[revision] = value, row

    for revision, events in sorted(h.log.items()):
        for e in events:
            learn(e.key, revision, None if e.type == DELETE else e.value, e.row)
    for key, writes in h.writes.items():
        for w in writes:
            if w.revision is not None and w.op.status == "ok":
                learn(key, w.revision, w.value, w.op.completion)
    for op in lists:
        for key, value, mod in op.completion["value"]:
            learn(key, mod, _text(value), op.completion)
    for kh in out.values():
        kh.revisions = sorted(kh.values)
    return out


def unseen_deletes(h: WatchHistory) -> dict[str, int]:
    """Key -> when the first delete of it with no known revision was sent (it may have
    happened where no watch saw it, any time after)."""
    out: dict[str, int] = {}
    for key, writes in h.writes.items():
        starts = [w.op.start for w in writes
                  if w.type == DELETE and w.revision is None and w.op.status != "fail"]
        if starts:
            out[key] = min(starts)
    return out


def _compare(s: Snapshot, known: dict[str, KeyHistory], unseen: dict[str, int],
             res: CheckResult) -> None:
    keys = {k for k in known if k.startswith(s.prefix)} | set(s.objects)
    for key in sorted(keys):
        kh = known.get(key)
        truth = kh.at(s.revision) if kh else None
        got = s.objects.get(key)
        if got is not None:
            value, mod = got
            if mod > s.revision:
                res.violation(f"{s.what} at revision {s.revision}: {key!r} at mod_revision "
                              f"{mod}, from the future", rows=[s.row])
            elif truth is not None and truth[0] > mod:
                res.violation(f"{s.what} at revision {s.revision}: {key!r} = {value!r} at "
                              f"mod_revision {mod}, but it was "
                              f"{'deleted' if truth[1] is None else f'set to {truth[1]!r}'} "
                              f"at revision {truth[0]}", rows=[s.row, kh.rows[truth[0]]])
            elif truth is not None and truth[1] != value:
                res.violation(f"{s.what} at revision {s.revision}: {key!r} = {value!r} at "
                              f"mod_revision {mod}, but the history has {truth[1]!r} there",
                              rows=[s.row, kh.rows[truth[0]]])
        elif truth is not None and truth[1] is not None \
                and unseen.get(key, s.by_ns + 1) > s.by_ns:
            res.violation(f"{s.what} at revision {s.revision}: no {key!r}, but it was set "
                          f"to {truth[1]!r} at revision {truth[0]} and never deleted",
                          rows=[s.row, kh.rows[truth[0]]])


def _list_snapshot(op: Op) -> Snapshot:
    done = op.completion
    return Snapshot(f"list by {op.invoke.get('informer') or op.invoke.get('who')}",
                    done["revision"], op.invoke["key"], done["time_ns"],
                    {k: (_text(v), mod) for k, v, mod in done["value"]}, done)


def _caches(h: WatchHistory, lists: list[Op]) -> list[Snapshot]:
    """Each informer's cache at the end of each chain: its list with the chain's events
    applied in order (none when the chain delivered nothing)."""
    chains = h.chains()
    out = []
    for op in lists:
        chain = op.invoke.get("chain")
        events = [e for w in chains.get(chain, ()) for e in w.events] if chain else []
        if not events:
            continue
        cache = dict(_list_snapshot(op).objects)
        for e in events:
            if e.type == DELETE:
                cache.pop(e.key, None)
            else:
                cache[e.key] = (e.value, e.revision)
        last = events[-1]
        out.append(Snapshot(f"informer {chain}'s cache", last.revision, op.invoke["key"],
                            last.time_ns, cache, last.row))
    return out


def check_informer_cache(rows: Iterable[dict[str, Any]]) -> CheckResult:
    rows = list(rows)
    h = read_watches(rows)
    lists = [o for o in pair(r for r in rows if r.get("f") == "list") if o.status == "ok"]
    res = CheckResult("informer-cache", stats={"lists": len(lists)})
    if not lists:
        res.verdict, res.reason = "unknown", "no list succeeded"
        return res
    known = known_writes(h, lists)
    caches = _caches(h, lists)
    unseen = unseen_deletes(h)
    for s in [_list_snapshot(o) for o in lists] + caches:
        _compare(s, known, unseen, res)
    res.stats["caches"] = len(caches)
    return res


def check_k8s_cas(rows: Iterable[dict[str, Any]]) -> CheckResult:
    rows = list(rows)
    h = read_watches(rows)
    lists = [o for o in pair(r for r in rows if r.get("f") == "list") if o.status == "ok"]
    known = known_writes(h, lists)
    unseen = unseen_deletes(h)
    ops = pair(r for r in rows if r.get("f") in ("create", *SWAPS))
    res = CheckResult("k8s-cas", stats={"succeeded": 0, "refused": 0})
    for op in ops:
        key = op.invoke["key"]
        kh = known.get(key, KeyHistory({}, {}))
        asked = op.invoke["value"]
        expected = None if op.f == "create" else asked[0]
        if op.status == "fail":
            res.stats["refused"] += 1
            if op.completion.get("current") == expected:
                res.violation(f"{op.f} of {key!r} refused, but its compare held (the key "
                              f"at mod_revision {expected} in the same txn)", ops=[op.rows()])
            continue
        revision = op.get("revision") if op.status == "ok" else None
        if revision is None:
            continue
        res.stats["succeeded"] += 1
        before = kh.at(revision - 1)
        if op.f == "create":
            if before is not None and before[1] is not None \
                    and unseen.get(key, op.end + 1) > op.end:  # not a delete unseen
                res.violation(f"create of {key!r} at revision {revision} succeeded, but the "
                              f"key was set at revision {before[0]}",
                              ops=[op.rows()], rows=[kh.rows[before[0]]])
            continue
        between = kh.between(expected, revision)
        if between:
            res.violation(f"{op.f} of {key!r} at revision {revision} compared mod_revision "
                          f"{expected}, but the key was written at revision {between[0]} "
                          f"in between", ops=[op.rows()], rows=[kh.rows[between[0]]])
    if not res.stats["succeeded"]:
        res.verdict, res.reason = "unknown", "no create, update or delete succeeded"
    return res
