"""Session TTLs honoured: nothing expired early, nothing alive long after its TTL while
the cluster was healthy.

Rows: `open_session` (value: the TTL in seconds; ok adds `session`); later ops on that
session (`own`, with `session`) whose failure with `UNKNOWN_SESSION` says it was gone.
The workload sends no keepalives, so the server's deadline is at least the TTL after
the open was invoked (a new leader restarts it at the full TTL, only ever later):
- early: an op that *completed* before open-invoke + TTL found the session gone;
- late: an op *invoked* more than TTL + `late_slack_s` after the open completed found
  it alive, and no fault was in force from the open to that op (a fault may stop
  expiry, or restart the TTL at a new leader). `faults` are (start_ns, end_ns) pairs on
  the history's clock; the session's own close is never a factor (the workload closes
  only after its last op)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.history import pair
from coord.check.result import CheckResult

GONE = "UNKNOWN_SESSION"


def check_sessions(rows: Iterable[dict[str, Any]],
                   faults: Iterable[tuple[int, float]] = (),
                   late_slack_s: float = 5.0) -> CheckResult:
    res = CheckResult("sessions")
    faults = list(faults)
    ops = pair(r for r in rows if r.get("f") in ("open_session", "own"))
    opened = {}
    for op in ops:
        if op.f == "open_session" and op.status == "ok":
            opened[op.get("session")] = op
    early = late = probes = 0
    for op in ops:
        if op.f != "own" or op.get("session") not in opened:
            continue
        o = opened[op.get("session")]
        ttl_ns = int(float(o.invoke["value"]) * 1e9)
        probes += 1
        if op.status == "fail" and op.get("error") == GONE and op.end < o.start + ttl_ns:
            early += 1
            res.violation(f"session {op.get('session')} gone "
                          f"{(op.end - o.start) / 1e9:.2f} s after its open was sent "
                          f"(TTL {ttl_ns / 1e9:g} s)", ops=[o.rows(), op.rows()])
        elif op.status == "ok" and op.start > o.end + ttl_ns + late_slack_s * 1e9 and \
                not any(s < op.end and e > o.start for s, e in faults):
            late += 1
            res.violation(f"session {op.get('session')} still alive "
                          f"{(op.start - o.end) / 1e9:.2f} s after its open completed "
                          f"(TTL {ttl_ns / 1e9:g} s, no fault meanwhile)",
                          ops=[o.rows(), op.rows()])
    res.stats = {"sessions": len(opened), "session_ops": probes,
                 "gone": sum(1 for op in ops if op.f == "own" and op.get("error") == GONE)}
    return res
