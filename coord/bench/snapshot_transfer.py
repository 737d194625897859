"""`coord bench snapshot`: a follower's memory while it receives a large snapshot.

A 3-member cluster (real `coord serve` processes) is filled with `--keys` keys, writes
go on until the leader has taken a snapshot after the fill (so the log no longer holds
what a new member needs), then one follower is wiped and joins again (removed, its data
dir deleted, added back as a learner): the leader sends it the snapshot. The follower's
resident memory is sampled from /proc while it catches up; its peak is the kernel's own
high-water mark (VmHWM, over the process's whole life), its steady RSS the one it settles
at once caught up. The follower that was not wiped is printed beside it, as the RSS of a
member that applied the same state entry by entry: a restore that leaves its memory
fragmented settles high, and a peak over that steady RSS alone would flatter it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import threading
import time

import grpc

from coord.bench import log
from coord.bench.footprint import high_water_bytes, logged_snapshots, mib, rss_bytes
from coord.bench.run_record import print_json
from coord.bench.scale_restart import caught_up, load_on
from coord.bench.tables import BenchTable
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster

CATCH_UP_TIMEOUT = 900.0  # seconds the wiped follower may take to catch up
SNAPSHOT_TIMEOUT = 300.0  # seconds of writes after the fill for the leader to snapshot
SETTLE_S = 5.0  # seconds after catch-up before the steady RSS is read
SAMPLE_S = 0.05
SNAPSHOT_EVERY = 1000
"""The members' --snapshot-every: small, so a snapshot follows the fill soon."""
INSTALL_LINE = re.compile(r"restored a snapshot of (\d+) bytes at index (\d+) in ([\d.]+)s")
"""What a member logs once it installed a leader's snapshot (server/node/driver.py)."""


class _Sampler:
    """The largest VmRSS of one process seen every SAMPLE_S, on a thread (a check of
    VmHWM, and the curve's shape in the log)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.max_rss = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.max_rss = max(self.max_rss, rss_bytes(self.pid))

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _revision(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.MaintenanceStub(ch).Status(epb.StatusRequest(), timeout=30).header.revision


def _snapshot_after_fill(cluster: LocalCluster) -> tuple[str, int, int]:
    """Single puts to one key until the leader logs a snapshot it began after the fill
    (a second new one: the first may have started before the fill ended); the leader,
    and the snapshot's (bytes, index). An election under load can move the leader: a put
    refused as UNAVAILABLE looks it up again and counts that one's snapshots."""
    deadline = time.monotonic() + SNAPSHOT_TIMEOUT
    while time.monotonic() < deadline:
        leader = cluster.wait_for_leader(timeout=30)
        path = cluster.members[leader].log_path
        before = len(logged_snapshots(path))
        try:
            with grpc.insecure_channel(cluster.members[leader].listen) as ch:
                kv = erpc.KVStub(ch)
                while time.monotonic() < deadline:
                    for _ in range(100):
                        kv.Put(epb.PutRequest(key=b"bench/tick", value=b"t"), timeout=30)
                    taken = logged_snapshots(path)
                    if len(taken) >= before + 2:
                        size, index, _s = taken[-1]
                        return leader, size, index
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            log(f"  a put to {leader} failed ({e.details()}); finding the leader again")
    raise RuntimeError(f"the leader took no snapshot within {SNAPSHOT_TIMEOUT:g}s of writes")


def measure(keys: int, clients: int, random_values: bool = False) -> dict:
    """One run: fill, snapshot, wipe a follower, sample it through its catch-up."""
    args = ["--snapshot-every", str(SNAPSHOT_EVERY)]
    with LocalCluster(3, extra_args=args) as cluster:
        leader = cluster.wait_for_leader(timeout=30)
        t0 = time.monotonic()
        errors = [0]
        asyncio.run(load_on(cluster.members[leader].listen, 0, keys, clients, errors,
                            random_values))
        fill_s = time.monotonic() - t0
        log(f"  filled {keys} keys in {fill_s:.1f} s")
        leader, snap_bytes, snap_index = _snapshot_after_fill(cluster)
        revision = _revision(cluster.members[leader].listen)
        followers = [n for n in cluster.members if n != leader]
        wiped, kept = followers
        log(f"  leader {leader} snapshot {mib(snap_bytes)} MiB at index {snap_index}; "
            f"wiping {wiped}")
        leader_pid = cluster.members[leader].proc.pid
        leader_before = rss_bytes(leader_pid)
        with _Sampler(leader_pid) as leader_sampler:
            started = cluster.rejoin_member(wiped, timeout=60, wait=False)
            pid = cluster.members[wiped].proc.pid
            with _Sampler(pid) as sampler:
                catchup_s = caught_up(cluster.members[wiped].listen, revision, started,
                                      CATCH_UP_TIMEOUT)
                time.sleep(SETTLE_S)
                steady = rss_bytes(pid)
        peak = high_water_bytes(pid)
        kept_rss = rss_bytes(cluster.members[kept].proc.pid)
        installs = INSTALL_LINE.findall(cluster.members[wiped].log_path.read_text(
            errors="replace"))
        row = {
            "keys": keys, "random_values": random_values, "revision": revision,
            "fill_s": fill_s, "errors": errors[0],
            "snapshot_bytes": snap_bytes, "snapshot_index": snap_index,
            "installs": len(installs),
            "install_s": float(installs[-1][2]) if installs else None,
            "catchup_s": catchup_s,
            "follower_peak_rss": peak, "follower_sampled_max_rss": sampler.max_rss,
            "follower_steady_rss": steady, "ratio": peak / steady if steady else None,
            "kept_follower_rss": kept_rss,
            "ratio_to_kept": peak / kept_rss if kept_rss else None,
            "leader_rss_before": leader_before,
            "leader_rss_max_during": leader_sampler.max_rss,
            "leader_rss_after": rss_bytes(leader_pid),
        }
        cluster.promote(wiped, timeout=60)
    return row


def table(row: dict) -> BenchTable:
    """The table `coord bench snapshot` prints, from its figures (as --json gives them):
    the wiped follower's peak and steady RSS beside the one that was not wiped."""
    install = "-" if row["install_s"] is None else f"{row['install_s']:.2f}"
    return BenchTable(
        ["keys", "values", "snapshot MiB", "installs", "install s", "catch-up s", "peak MiB",
         "steady MiB", "peak/steady", "kept follower MiB", "peak/kept",
         "leader before/max MiB"],
        [[f"{row['keys']:,}", "random" if row["random_values"] else "repeated",
          mib(row["snapshot_bytes"]), str(row["installs"]), install,
          f"{row['catchup_s']:.2f}", mib(row["follower_peak_rss"]),
          mib(row["follower_steady_rss"]), f"{row['ratio']:.2f}",
          mib(row["kept_follower_rss"]), f"{row['ratio_to_kept']:.2f}",
          f"{mib(row['leader_rss_before'])}/{mib(row['leader_rss_max_during'])}"]])


def run_snapshot_bench(args: argparse.Namespace) -> int:
    clients = max(int(x) for x in args.concurrency.split(",") if x)
    values = "random" if args.random_values else "repeated"
    log(f"snapshot: a 3-member coord, {args.keys} keys ({values} values), then a wiped "
        "follower ...")
    row = measure(args.keys, clients, args.random_values)
    if args.json:
        print_json(args.run, row)
    else:
        print("\n".join(table(row).text()))
    return 0


