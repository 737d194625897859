"""Session TTLs honoured: nothing expired early, nothing alive long after its TTL while
the cluster was healthy.

Rows: `open_session` (value: the TTL in seconds; ok adds `session`); later ops on that
session (`own`, with `session`) whose failure with `UNKNOWN_SESSION` says it was gone.
The workload sends no keepalives, so the server's deadline is at least the TTL after
the open was invoked (a new leader restarts it at the full TTL, only ever later):
- early: an op that *completed* before open-invoke + TTL found the session gone;
- late: an op *invoked* more than TTL + `late_slack_s` after the later of the open's
  completion and the end of the last fault in force since the open found it alive (a
  fault may stop expiry, or restart the TTL at a new leader; once it ends, the TTL
  runs again). `faults` are (start_ns, end_ns) pairs on the oplog's clock; the
  session's own close is never a factor (the workload closes only after its last op)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.oplog import pair
from coord.check.result import CheckResult

GONE = "UNKNOWN_SESSION"

FAULT_AFTERMATH_NS = 3_000_000_000
"""A fault's effects outlast it (an election, a restarted member catching up)."""


def fault_windows(faults: Iterable[dict[str, Any]]) -> list[tuple[int, float]]:
    """(start_ns, end_ns) per fault (the rows of a run's faults.jsonl), stretched by its
    aftermath; a fault never healed lasts forever."""
    return [(f["start_ns"], f["end_ns"] + FAULT_AFTERMATH_NS if f.get("end_ns")
             else float("inf")) for f in faults if f.get("start_ns")]


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
        elif op.status == "ok":
            since = max([o.end, *(e for s, e in faults if s < op.start and e > o.start)])
            if op.start > since + ttl_ns + late_slack_s * 1e9:
                late += 1
                cause = "its open completed" if since == o.end else "the last fault ended"
                res.violation(f"session {op.get('session')} still alive "
                              f"{(op.start - since) / 1e9:.2f} s after {cause} "
                              f"(TTL {ttl_ns / 1e9:g} s)", ops=[o.rows(), op.rows()])
    res.stats = {"sessions": len(opened), "session_ops": probes,
                 "gone": sum(1 for op in ops if op.f == "own" and op.get("error") == GONE)}
    return res
