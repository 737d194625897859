"""Oplog checkers: pure functions over the rows of an oplog (coord.check.oplog),
no cluster access. `linearizable.check_key` is the one per-key linearizability check;
`check_all` runs every checker that applies to an oplog."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CheckOptions:
    """What a run knows beyond its oplog, for the checkers that weigh it: the faults'
    windows ((start_ns, end_ns) on the oplog's clock: an expiry inside one is the
    fault's doing, not a session's) and the bound on each key's linearizability search
    (long runs have long keys)."""

    faults: tuple[tuple[int, float], ...] = ()
    lin_time_limit_s: float = DEFAULT_TIME_LIMIT_S


Checker = Callable[[list[dict], CheckOptions], CheckResult]
"""A checker as `check_all` runs it: the oplog's rows and the run's options."""


def _rows_only(check: Callable[[list[dict]], CheckResult]) -> Checker:
    """A checker that reads nothing but the rows."""
    def run(rows: list[dict], _options: CheckOptions) -> CheckResult:
        return check(rows)
    return run


def _registers(rows: list[dict], options: CheckOptions) -> CheckResult:
    return check_registers(rows, time_limit_s=options.lin_time_limit_s)


def _sessions(rows: list[dict], options: CheckOptions) -> CheckResult:
    return check_sessions(rows, options.faults)


CHECKERS: dict[str, tuple[tuple[str, ...], Checker]] = {
    "linearizable": (("read", "write", "cas"), _registers),
    "stale-reads": (("read",), _rows_only(check_stale_reads)),
    "lost-writes": (("add", "read_all"), _rows_only(check_lost_writes)),
    "ownership": (("own", "write_fenced"), _rows_only(check_ownership)),
    "producers": (("allocate_pid_block", "lease_pid", "init_producer", "check_producer"),
                  _rows_only(check_producers)),
    "sessions": (("open_session",), _sessions),
    "watch-ordered": (("watch",), _rows_only(check_watch_ordered)),
    "watch-unique": (("watch",), _rows_only(check_watch_unique)),
    "watch-atomic": (("watch",), _rows_only(check_watch_atomic)),
    "watch-reliable": (("watch",), _rows_only(check_watch_reliable)),
    "watch-resumable": (("watch",), _rows_only(check_watch_resumable)),
    "watch-prev-kv": (("watch",), _rows_only(check_watch_prev_kv)),
    "watch-filters": (("watch",), _rows_only(check_watch_filters)),
    "watch-history": (("watch",), _rows_only(check_watch_history)),
    "informer-cache": (("list",), _rows_only(check_informer_cache)),
    "k8s-cas": (("create", "update", "remove"), _rows_only(check_k8s_cas)),
    "owners-ordered": (("watch_owners",), _rows_only(check_owners_ordered)),
    "owners-unique": (("watch_owners",), _rows_only(check_owners_unique)),
    "owners-reliable": (("watch_owners",), _rows_only(check_owners_reliable)),
    "owners-history": (("watch_owners",), _rows_only(check_owners_history)),
    "session-events": (("session_events",), _rows_only(check_session_events)),
}
"""Checker name -> (the functions it reads, the checker)."""


def check_all(rows: Iterable[dict[str, Any]],
              options: CheckOptions = CheckOptions()) -> list[CheckResult]:
    """Each checker whose functions appear in the oplog, in CHECKERS order, every one
    given the run's `options`."""
    rows = list(rows)
    present = {r.get("f") for r in rows}
    return [check(rows, options) for fs, check in CHECKERS.values() if present & set(fs)]


__all__ = ["CHECKERS", "CheckOptions", "CheckResult", "Checker", "LinearizabilityResult",
           "check_all", "check_key", "check_lost_writes", "check_ownership", "check_producers",
           "check_registers", "check_sessions", "check_stale_reads"]
