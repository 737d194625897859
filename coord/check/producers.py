"""Producer-id safety over an oplog: a PID is never handed out twice (blocks,
leases and producers share one sequence), a producer's epoch only rises, and a fenced
zombie is never accepted.

Rows: `allocate_pid_block` ok: value [start, end) (end exclusive); `lease_pid` ok:
pid (a new lease); `init_producer` ok: key (the producer key), pid, epoch;
`check_producer` invoke: key, pid, epoch; ok = the cluster accepted that identity,
fail = refused (fenced)."""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from coord.check.oplog import Op, pair
from coord.check.result import CheckResult

FUNCTIONS = ("allocate_pid_block", "lease_pid", "init_producer", "check_producer")


def check_producers(rows: Iterable[dict[str, Any]]) -> CheckResult:
    res = CheckResult("producers")
    ops = pair(r for r in rows if r.get("f") in FUNCTIONS)
    ranges: list[tuple[int, int, str, Op]] = []  # [start, end) handed out, by whom
    producer_pid: dict[int, str] = {}
    inits: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.status != "ok":
            continue
        if op.f == "allocate_pid_block":
            start, end = op.get("value")
            ranges.append((start, end, f"block [{start}, {end})", op))
        elif op.f == "lease_pid":
            pid = op.get("pid")
            ranges.append((pid, pid + 1, f"lease of pid {pid}", op))
        elif op.f == "init_producer":
            key, pid = op.get("key"), op.get("pid")
            inits[key].append(op)
            if pid not in producer_pid:
                producer_pid[pid] = key
                ranges.append((pid, pid + 1, f"producer {key!r} pid {pid}", op))
            elif producer_pid[pid] != key:
                res.violation(f"pid {pid} given to producers {producer_pid[pid]!r} and {key!r}",
                              ops=[op.rows()])
    ranges.sort(key=lambda r: (r[0], r[1]))
    for a, b in zip(ranges, ranges[1:], strict=False):
        if b[0] < a[1]:
            res.violation(f"pid handed out twice: {a[2]} and {b[2]} overlap",
                          ops=[a[3].rows(), b[3].rows()])
    for key, key_inits in inits.items():
        _epochs(res, key, key_inits)
    _zombies(res, ops, inits)
    res.stats = {"pids_handed_out": sum(e - s for s, e, _, _ in ranges),
                 "producers": len(inits),
                 "checks_refused": sum(1 for o in ops
                                       if o.f == "check_producer" and o.status == "fail")}
    return res


def _epochs(res: CheckResult, key: str, ops: list[Op]) -> None:
    """Distinct InitProducer calls get distinct identities, rising in real-time order."""
    seen: dict[tuple, Op] = {}
    for op in ops:
        ident = (op.get("pid"), op.get("epoch"))
        if ident in seen:
            res.violation(f"producer {key!r}: identity {ident} handed out twice",
                          ops=[seen[ident].rows(), op.rows()])
        seen[ident] = op
    # Sweep in start order; `best` holds, per pid, the highest epoch among the ops
    # that completed before the current one started.
    by_end = sorted(ops, key=lambda o: o.end)
    best: dict[int, Op] = {}
    i = 0
    for b in sorted(ops, key=lambda o: o.start):
        while i < len(by_end) and by_end[i].end < b.start:
            a = by_end[i]
            top = best.get(a.get("pid"))
            if top is None or a.get("epoch") > top.get("epoch"):
                best[a.get("pid")] = a
            i += 1
        a = best.get(b.get("pid"))
        if a is not None and a.get("epoch") >= b.get("epoch"):
            res.violation(f"producer {key!r}: epoch went back from {a.get('epoch')} to "
                          f"{b.get('epoch')} on pid {a.get('pid')}",
                          ops=[a.rows(), b.rows()])


def _zombies(res: CheckResult, ops: list[Op], inits: dict[str, list[Op]]) -> None:
    """A check of (pid, epoch) accepted although a newer identity had been handed out
    (its InitProducer completed) before the check was even sent."""
    done: dict[tuple, list[tuple[float, Op]]] = defaultdict(list)
    for k, v in inits.items():
        for o in v:
            done[(k, o.get("pid"))].append((o.end, o))
    ends: dict[tuple, list[float]] = {}
    newest: dict[tuple, list[Op]] = {}  # prefix: the highest epoch among the first i+1
    for ident, items in done.items():
        items.sort(key=lambda t: t[0])
        ends[ident] = [t[0] for t in items]
        newest[ident] = list(itertools.accumulate(
            (o for _, o in items), lambda top, o: o if o.get("epoch") > top.get("epoch") else top))
    for op in ops:
        if op.f != "check_producer" or op.status != "ok":
            continue
        key, pid, epoch = op.get("key"), op.get("pid"), op.get("epoch")
        upto = bisect.bisect_left(ends.get((key, pid), []), op.start)
        if upto == 0:
            continue
        top = newest[(key, pid)][upto - 1]
        if top.get("epoch") > epoch:
            res.violation(f"producer {key!r}: fenced identity {(pid, epoch)} accepted after "
                          f"{(pid, top.get('epoch'))} was handed out",
                          ops=[top.rows(), op.rows()])
