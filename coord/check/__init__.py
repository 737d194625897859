"""Oplog checkers: pure functions over the rows of an oplog (coord.check.oplog),
no cluster access. `linearizable.check_key` is the one per-key linearizability check;
`check_all` runs every checker that applies to an oplog."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coord.check.informers import check_informer_cache, check_k8s_cas
from coord.check.linearizable import DEFAULT_TIME_LIMIT_S, LinearizabilityResult, check_key
from coord.check.lost_writes import check_lost_writes
from coord.check.owner_stream import (
    check_owners_history,
    check_owners_ordered,
    check_owners_reliable,
    check_owners_unique,
)
from coord.check.ownership import check_ownership
from coord.check.producers import check_producers
from coord.check.registers import check_registers
from coord.check.result import CheckResult
from coord.check.session_stream import check_session_events
from coord.check.sessions import check_sessions
from coord.check.stale_reads import check_stale_reads
from coord.check.watch_coverage import check_watch_reliable, check_watch_resumable
from coord.check.watch_history import check_watch_history
from coord.check.watch_prev_kv import check_watch_prev_kv
from coord.check.watches import (
    check_watch_atomic,
    check_watch_filters,
    check_watch_ordered,
    check_watch_unique,
)

CHECKERS: dict[str, tuple[tuple[str, ...], Callable[[list[dict]], CheckResult]]] = {
    "linearizable": (("read", "write", "cas"), check_registers),
    "stale-reads": (("read",), check_stale_reads),
    "lost-writes": (("add", "read_all"), check_lost_writes),
    "ownership": (("own", "write_fenced"), check_ownership),
    "producers": (("allocate_pid_block", "lease_pid", "init_producer", "check_producer"),
                  check_producers),
    "sessions": (("open_session",), check_sessions),
    "watch-ordered": (("watch",), check_watch_ordered),
    "watch-unique": (("watch",), check_watch_unique),
    "watch-atomic": (("watch",), check_watch_atomic),
    "watch-reliable": (("watch",), check_watch_reliable),
    "watch-resumable": (("watch",), check_watch_resumable),
    "watch-prev-kv": (("watch",), check_watch_prev_kv),
    "watch-filters": (("watch",), check_watch_filters),
    "watch-history": (("watch",), check_watch_history),
    "informer-cache": (("list",), check_informer_cache),
    "k8s-cas": (("create", "update", "remove"), check_k8s_cas),
    "owners-ordered": (("watch_owners",), check_owners_ordered),
    "owners-unique": (("watch_owners",), check_owners_unique),
    "owners-reliable": (("watch_owners",), check_owners_reliable),
    "owners-history": (("watch_owners",), check_owners_history),
    "session-events": (("session_events",), check_session_events),
}
"""Checker name -> (the functions it reads, the checker)."""


def check_all(rows: Iterable[dict[str, Any]],
              faults: Iterable[tuple[int, float]] = (), *,
              lin_time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> list[CheckResult]:
    """Each checker whose functions appear in the oplog, in CHECKERS order. `faults`
    ((start_ns, end_ns) on the oplog's clock) go to the checkers that weigh them;
    `lin_time_limit_s` bounds each key of the linearizability check (long runs have
    long keys)."""
    rows = list(rows)
    present = {r.get("f") for r in rows}

    def run(name: str, fn: Callable[[list[dict]], CheckResult]) -> CheckResult:
        if name == "sessions":
            return check_sessions(rows, faults)
        if name == "linearizable":
            return check_registers(rows, time_limit_s=lin_time_limit_s)
        return fn(rows)

    return [run(name, fn) for name, (fs, fn) in CHECKERS.items() if present & set(fs)]


__all__ = ["CHECKERS", "CheckResult", "LinearizabilityResult", "check_all", "check_key",
           "check_lost_writes", "check_ownership", "check_producers", "check_registers",
           "check_sessions", "check_stale_reads"]
