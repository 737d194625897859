"""Every register key of an oplog through the per-key linearizability check
(coord.check.linearizable.check_key), gathered into one CheckResult."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.linearizable import DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT_S, check_key
from coord.check.oplog import by_key
from coord.check.result import CheckResult


def check_registers(rows: Iterable[dict[str, Any]], *,
                    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                    max_states: int = DEFAULT_MAX_STATES) -> CheckResult:
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
    if unknown and res.verdict == "ok":
        res.verdict = "unknown"
        res.reason = f"{len(unknown)} key(s) undecided: " + "; ".join(unknown[:3])
    res.stats = {"keys": n_keys, "ops": n_ops, "undecided_keys": len(unknown)}
    return res

