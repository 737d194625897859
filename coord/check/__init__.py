"""History checkers: pure functions over client-history rows (coord.check.history),
no cluster access. `linearizable.check_key` is the one per-key linearizability check;
`check_all` runs every checker that applies to a history."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coord.check.linearizable import LinearizabilityResult, check_key
from coord.check.lost_writes import check_lost_writes
from coord.check.ownership import check_ownership
from coord.check.producers import check_producers
from coord.check.registers import check_registers
from coord.check.result import CheckResult

CHECKERS: dict[str, tuple[tuple[str, ...], Callable[[list[dict]], CheckResult]]] = {
    "linearizable": (("read", "write", "cas"), check_registers),
    "lost-writes": (("add", "read_all"), check_lost_writes),
    "ownership": (("own", "write_fenced"), check_ownership),
    "producers": (("allocate_pid_block", "lease_pid", "init_producer", "check_producer"),
                  check_producers),
}
"""Checker name -> (the functions it reads, the checker)."""


def check_all(rows: Iterable[dict[str, Any]]) -> list[CheckResult]:
    """Each checker whose functions appear in the history, in CHECKERS order."""
    rows = list(rows)
    present = {r.get("f") for r in rows}
    return [fn(rows) for fs, fn in CHECKERS.values() if present & set(fs)]


__all__ = ["CHECKERS", "CheckResult", "LinearizabilityResult", "check_all", "check_key",
           "check_lost_writes", "check_ownership", "check_producers", "check_registers"]
