"""No acknowledged write lost: every `add` that was acknowledged is in the final state,
and nothing is there that nobody wrote.

Rows: `add` writes a fresh key once (key, value); `read_all` is the final read after
the run (ok; value = [[key, value], ...] of every key under the workload's prefix). An
add with an unknown outcome may be there or not (counted as recovered when it is)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.oplog import pair
from coord.check.result import CheckResult


def check_lost_writes(rows: Iterable[dict[str, Any]]) -> CheckResult:
    res = CheckResult("lost-writes")
    ops = pair(r for r in rows if r.get("f") in ("add", "read_all"))
    finals = [o for o in ops if o.f == "read_all" and o.status == "ok"]
    adds = [o for o in ops if o.f == "add"]
    if not finals:
        res.verdict, res.reason = "unknown", "no final read_all in the oplog"
        return res
    final = finals[-1]
    present = {k: v for k, v in final.get("value")}
    attempted = {o.get("key"): o for o in adds}
    lost = recovered = 0
    for o in adds:
        k = o.get("key")
        if o.status == "ok":
            if k not in present:
                lost += 1
                res.violation(f"acknowledged write of {k!r} is missing from the final state",
                              ops=[o.rows()])
            elif present[k] != o.invoke.get("value"):
                res.violation(f"{k!r} holds {present[k]!r}, not the acknowledged "
                              f"{o.invoke.get('value')!r}", ops=[o.rows()])
        elif k in present:
            recovered += 1
    for k in present:
        if k not in attempted:
            res.violation(f"{k!r} is in the final state but nobody wrote it", ops=[final.rows()])
    res.stats = {"acknowledged": sum(o.status == "ok" for o in adds), "lost": lost,
                 "unknown_present": recovered, "final_keys": len(present)}
    return res
