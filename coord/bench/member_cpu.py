"""CPU per operation on each member, read from /proc around one measurement: issue 14's
profile summary (how many µs of CPU the leader and each follower spend per op), for
coord and etcd alike, from outside the processes so both are measured the same way."""

from __future__ import annotations

from collections.abc import Callable

from coord.bench.footprint import cpu_seconds

Meter = Callable[[], dict[str, float]]
"""CPU seconds used so far: the leader's, and the followers' mean (if there are any)."""


def member_meter(pids: dict[str, int], leader: str) -> Meter:
    followers = [p for n, p in pids.items() if n != leader]

    def read() -> dict[str, float]:
        if not followers:  # one process (the gRPC floor): no follower to report
            return {"leader": cpu_seconds(pids[leader])}
        mean = sum(map(cpu_seconds, followers)) / len(followers)
        return {"leader": cpu_seconds(pids[leader]), "follower": mean}

    return read


def per_op(before: dict[str, float], after: dict[str, float], ops: int) -> dict[str, float]:
    """µs of CPU per op by role between two readings."""
    return {role: (after[role] - before[role]) * 1e6 / max(ops, 1) for role in before}
