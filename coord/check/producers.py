"""Producer-id safety over a client history: a PID is never handed out twice (blocks,
leases and producers share one sequence), a producer's epoch only rises, and a fenced
zombie is never accepted.

Rows: `allocate_pid_block` ok: value [start, end) (end exclusive); `lease_pid` ok:
pid (a new lease); `init_producer` ok: key (the producer key), pid, epoch;
`check_producer` invoke: key, pid, epoch; ok = the cluster accepted that identity,
fail = refused (fenced)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from coord.check.history import Op, pair
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
    by_end = sorted(ops, key=lambda o: o.end)
    for b in ops:
        for a in by_end:
            if a.end >= b.start:
                break
            if a.get("pid") == b.get("pid") and a.get("epoch") >= b.get("epoch"):
                res.violation(f"producer {key!r}: epoch went back from {a.get('epoch')} to "
                              f"{b.get('epoch')} on pid {a.get('pid')}",
                              ops=[a.rows(), b.rows()])


def _zombies(res: CheckResult, ops: list[Op], inits: dict[str, list[Op]]) -> None:
    """A check of (pid, epoch) accepted although a newer identity had been handed out
    (its InitProducer completed) before the check was even sent."""
    ends = {k: sorted((o.end, (o.get("pid"), o.get("epoch")), o) for o in v)
            for k, v in inits.items()}
    for op in ops:
        if op.f != "check_producer" or op.status != "ok":
            continue
        key, ident = op.get("key"), (op.get("pid"), op.get("epoch"))
        done = ends.get(key, [])
        upto = bisect.bisect_left(done, (op.start,), key=lambda t: (t[0],))
        newer = [t for t in done[:upto] if t[1][0] == ident[0] and t[1][1] > ident[1]]
        if newer:
            res.violation(f"producer {key!r}: fenced identity {ident} accepted after "
                          f"{newer[-1][1]} was handed out", ops=[newer[-1][2].rows(), op.rows()])
