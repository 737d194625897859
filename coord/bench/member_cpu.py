"""What the members spent during one measurement, read from outside the processes so
coord and etcd are measured the same way: CPU and context switches per operation on the
leader and a follower, from /proc, and, for coord, the snapshots its members took
meanwhile, from their logs (a snapshot costs every member a few hundred milliseconds of
CPU once the state is large, so a row it lands in runs slower, and the table says so
instead of leaving it to look like noise), and the steps of its write rounds that each
member counts itself (its Status's round counts). Times move with the machine; the
counts do not, so they are what a change to the round can be held to."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from coord.bench.footprint import context_switches, cpu_seconds, logged_snapshots

Meter = Callable[[], dict]
"""The members' totals so far: per role ("leader", and the followers' mean if there
are any) a dict of counts ("cpu_s", "vcsw", "ivcsw", "loop_vcsw", and a coord member's
round counts); with member logs, "snapshots" taken and their "snapshot_s"."""

Counter = Callable[[], dict[str, int]]
"""One member's own counts so far (a coord member's Status round counts)."""

ROLES = ("leader", "follower")


def process_counts(pid: int) -> dict[str, float]:
    """What /proc says process `pid` has spent so far: CPU seconds, context switches
    (voluntary and involuntary, all threads) and its main thread's voluntary ones."""
    vcsw, ivcsw, loop_vcsw = context_switches(pid)
    return {"cpu_s": cpu_seconds(pid), "vcsw": vcsw, "ivcsw": ivcsw, "loop_vcsw": loop_vcsw}


def _mean(readings: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r.get(k, 0) for r in readings) / len(readings) for k in readings[0]}


def member_meter(pids: dict[str, int], leader: str, logs: dict[str, Path] | None = None,
                 counters: dict[str, Counter] | None = None) -> Meter:
    """A Meter for the processes `pids` (by member name), `leader` among them; `logs`:
    coord members' log files, to count their snapshots (none for etcd); `counters`: what
    reads each member's own counts (none for etcd and the floor)."""
    followers = [n for n in pids if n != leader]

    def member(name: str) -> dict[str, float]:
        counts = process_counts(pids[name])
        if counters is not None:
            counts.update(counters[name]())
        return counts

    def read() -> dict:
        reading: dict = {"leader": member(leader)}
        if followers:  # one process (the gRPC floor) has no follower to report
            reading["follower"] = _mean([member(n) for n in followers])
        if logs is not None:
            reading.update(snapshots_logged(logs.values()))
        return reading

    return read


def snapshots_logged(logs: Iterable[Path]) -> dict[str, float]:
    """How many snapshots the members logged as taken so far, and their seconds in all
    (the node's "took a snapshot of N bytes at index I in S s" line)."""
    taken = [s for path in logs for _size, _index, s in logged_snapshots(path)]
    return {"snapshots": len(taken), "snapshot_s": sum(taken)}


def measured(before: dict, after: dict, ops: int) -> dict:
    """A row's fields from two readings around `ops` operations: µs of CPU per op by
    role, every other count per op by role (`counts_per_op`), and the snapshots taken
    between them if the meter counts them."""
    ops = max(ops, 1)
    roles = [role for role in ROLES if role in before]
    fields: dict = {
        "cpu_us_per_op": {r: (after[r]["cpu_s"] - before[r]["cpu_s"]) * 1e6 / ops
                          for r in roles},
        "counts_per_op": {r: {k: (after[r][k] - before[r][k]) / ops
                              for k in after[r] if k != "cpu_s" and k in before[r]}
                          for r in roles},
    }
    if "snapshots" in before:
        fields["snapshots"] = {"count": int(after["snapshots"] - before["snapshots"]),
                               "seconds": after["snapshot_s"] - before["snapshot_s"]}
    return fields
