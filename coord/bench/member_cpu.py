"""What the members spent during one measurement, read from outside the processes so
coord and etcd are measured the same way: CPU per operation on the leader and a
follower, from /proc, and, for coord, the snapshots its members took meanwhile, from
their logs: a snapshot costs every member a few hundred milliseconds of CPU once the
state is large, so a row it lands in runs slower, and the table says so instead of
leaving it to look like noise."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from coord.bench.footprint import cpu_seconds, logged_snapshots

Meter = Callable[[], dict[str, float]]
"""The members' totals so far: CPU seconds of the leader and the followers' mean (if
there are any), and with member logs, "snapshots" taken and their "snapshot_s"."""

ROLES = ("leader", "follower")


def member_meter(pids: dict[str, int], leader: str,
                 logs: dict[str, Path] | None = None) -> Meter:
    """A Meter for the processes `pids` (by member name), `leader` among them; `logs`:
    coord members' log files, to count their snapshots (none for etcd)."""
    followers = [p for n, p in pids.items() if n != leader]

    def read() -> dict[str, float]:
        reading = {"leader": cpu_seconds(pids[leader])}
        if followers:  # one process (the gRPC floor) has no follower to report
            reading["follower"] = sum(map(cpu_seconds, followers)) / len(followers)
        if logs is not None:
            reading.update(snapshots_logged(logs.values()))
        return reading

    return read


def snapshots_logged(logs: Iterable[Path]) -> dict[str, float]:
    """How many snapshots the members logged as taken so far, and their seconds in all
    (the node's "took a snapshot of N bytes at index I in S s" line)."""
    taken = [s for path in logs for _size, _index, s in logged_snapshots(path)]
    return {"snapshots": len(taken), "snapshot_s": sum(taken)}


def measured(before: dict[str, float], after: dict[str, float], ops: int) -> dict:
    """A row's fields from two readings around `ops` operations: µs of CPU per op by
    role, and the snapshots taken between them if the meter counts them."""
    fields: dict = {"cpu_us_per_op": {role: (after[role] - before[role]) * 1e6 / max(ops, 1)
                                      for role in ROLES if role in before}}
    if "snapshots" in before:
        fields["snapshots"] = {"count": int(after["snapshots"] - before["snapshots"]),
                               "seconds": after["snapshot_s"] - before["snapshot_s"]}
    return fields
