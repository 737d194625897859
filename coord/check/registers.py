"""Every register key of an oplog through the per-key linearizability check
(coord.check.linearizable.check_key), gathered into one CheckResult."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.linearizable import check_key, frozen
from coord.check.oplog import by_key
from coord.check.result import CheckResult


def check_registers(rows: Iterable[dict[str, Any]], *, time_limit_s: float = 10.0,
                    max_states: int = 2_000_000) -> CheckResult:
    rows = list(rows)
    res = CheckResult("linearizable")
    unknown: list[str] = []
    n_ops = n_keys = 0
    # `add` keys are written once each and read back as a whole (coord.check.lost_writes)
    for key, key_rows in sorted(by_key(rows, ("read", "write", "cas")).items()):
        r = check_key(key_rows, time_limit_s=time_limit_s, max_states=max_states)
        n_ops += r.ops
        n_keys += 1
        if r.verdict == "illegal":
            res.violation(f"key {key!r}: {r.anomaly['message']}", key=key, anomaly=r.anomaly)
        elif r.verdict == "unknown":
            unknown.append(f"{key}: {r.reason}")
    _flagged_reads_are_real(rows, res)
    if unknown and res.verdict == "ok":
        res.verdict = "unknown"
        res.reason = f"{len(unknown)} key(s) undecided: " + "; ".join(unknown[:3])
    res.stats = {"keys": n_keys, "ops": n_ops, "undecided_keys": len(unknown),
                 "read_only_reads": sum(1 for r in rows if r.get("f") == "read"
                                        and r.get("type") == "ok" and r.get("read_only"))}
    return res


def _flagged_reads_are_real(rows: list[dict[str, Any]], res: CheckResult) -> None:
    """A read flagged read-only may be stale, but what it returns must have been in the
    register: a value some write or cas on that key was sent before the read answered
    (or absent)."""
    sent: dict[str, list[tuple[int, Any]]] = {}
    for r in rows:
        if r.get("type") == "invoke" and r.get("f") in ("write", "cas"):
            v = r.get("value")
            sent.setdefault(r.get("key"), []).append(
                (r["time_ns"], frozen(v[1] if r["f"] == "cas" else v)))
    for r in rows:
        if r.get("f") != "read" or r.get("type") != "ok" or not r.get("read_only"):
            continue
        v = frozen(r.get("value"))
        if v is None:
            continue
        if not any(t <= r["time_ns"] and w == v for t, w in sent.get(r.get("key"), ())):
            res.violation(f"key {r.get('key')!r}: a read-only read returned {v!r}, which "
                          f"nothing had written", key=r.get("key"), ops=[[r]])
