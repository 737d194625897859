"""The deterministic coordination state machine: KV, sessions, ownership, producer ids.

Pure: no I/O, clocks or randomness inside `apply`. Modules: `commands` (vocabulary and
wire format), `results`, `records` (shared value types), `kv`, `sessions`, `ownership`,
`pids`, `machine` (`CoordMachine`, the StateMachine the Raft log drives), and the small
pieces they share: `codec`, `ledger` (the one revision), `dedup`, `errors`, `limits`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CoordMachine"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m coord.sm.machine` (the micro-benchmark) runs the module once.
    if name == "CoordMachine":
        from coord.sm.machine import CoordMachine

        return CoordMachine
    raise AttributeError(name)
