"""The deterministic coordination state machine: KV, sessions, ownership, producer ids.

Pure: no I/O, clocks or randomness inside `apply`. Modules: `commands` (vocabulary and
wire format), `results`, `records` (shared value types), `kv`, `sessions`, `ownership`,
`pids`, `machine` (`CoordMachine`, the StateMachine the Raft log drives), and the small
pieces they share: `canonical_json`, `ledger` (the one revision), `dedup`, `errors`, `limits`.
"""

from coord.sm.machine import CoordMachine

__all__ = ["CoordMachine"]
