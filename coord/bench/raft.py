"""`coord bench raft`: replicated-log throughput and leader failover on a real 3-member
loopback cluster of `coord serve` processes, driven through the public client only (as
etcd's tools/benchmark drives etcd). Prints figures; asserts nothing.

Throughput: one client process puts small values with the client library on its
pipelined stream to the leader, from each number of concurrent clients in turn; every
put is one proposal committed through the log (batching, fsync, replication) and
applied. The stream carries the requests of one loop turn in one message and the leader
proposes them together, so with many clients the figure nears the log's own rate; it is
end to end on this box, the client sharing its cores with the members. Failover is
measured from outside: kill -9 the leader, then time until a write commits again."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import grpc

from coord.bench import log
from coord.bench.api import closed_loop
from coord.bench.run_record import print_json
from coord.bench.stats import summarize
from coord.bench.tables import BenchTable, cell
from coord.client import AsyncClient
from coord.testing import LocalCluster

VALUE = b"x" * 16


async def _put_load(endpoint: str, levels: list[int], seconds: float) -> list[dict]:
    """After a second's warm-up at 16 clients, `seconds` of back-to-back puts at each
    level of concurrent clients, all on one pipelined stream to `endpoint`."""
    rows = []
    async with AsyncClient([endpoint], stream=True) as client:

        async def put(w: int, i: int) -> None:
            await client.put(f"bench/{w}/{i % 100}", VALUE)

        await closed_loop(put, 16, 1.0)  # warm-up
        for n in levels:
            log(f"throughput: {n} concurrent clients for {seconds:g}s ...")
            r = await closed_loop(put, n, seconds)
            rows.append({"concurrency": n, "committed": r["ops"], "per_s": r["per_s"],
                         "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"]})
            log(f"  {r['per_s']:9.0f} proposals/s  p50 {r['p50_ms']:6.2f} ms"
                f"  p99 {r['p99_ms']:6.2f} ms")
    return rows


def measure_throughput(cluster: LocalCluster, levels: list[int], seconds: float) -> list[dict]:
    leader = cluster.wait_for_leader(timeout=15)
    log(f"putting through the pipelined stream to the leader, {leader} ...")
    return asyncio.run(_put_load(cluster.members[leader].listen, levels, seconds))
def _first_write(cluster: LocalCluster, names: list[str], deadline: float) -> float | None:
    """Poll the survivors with small writes until one commits; return when it did."""
    clients = {n: cluster.client(n, timeout=0.5) for n in names}
    try:
        while time.monotonic() < deadline:
            for c in clients.values():
                with contextlib.suppress(grpc.RpcError):
                    c.propose(b"failover-probe", timeout=0.5)
                    return time.monotonic()
            time.sleep(0.01)
        return None
    finally:
        for c in clients.values():
            c.close()


def measure_failover(cluster: LocalCluster, trials: int) -> list[float]:
    times = []
    for trial in range(trials):
        leader = cluster.wait_for_leader(timeout=20)
        survivors = [n for n in cluster.members if n != leader]
        t0 = time.monotonic()
        cluster.kill(leader)
        t1 = _first_write(cluster, survivors, t0 + 20)
        if t1 is None:
            log(f"failover trial {trial + 1}: no write committed within 20 s")
            continue
        times.append(t1 - t0)
        log(f"failover trial {trial + 1}/{trials}: killed {leader}, write ok after {t1 - t0:.3f}s")
        cluster.start_member(leader, wait=True)
        _wait_caught_up(cluster, leader)
    return times


def _wait_caught_up(cluster: LocalCluster, name: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sts = cluster.statuses()
        if name in sts and len(sts) == len(cluster.members):
            commits = {s.commit_index for s in sts.values()}
            if max(commits) - sts[name].applied_index <= 1 and sts[name].leader_name:
                return
        time.sleep(0.1)


def run_raft_bench(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.concurrency.split(",") if x]
    log("starting a 3-member cluster on 127.0.0.1 (default timeouts) ...")
    with LocalCluster(3) as cluster:
        throughput = measure_throughput(cluster, levels, args.seconds)
        failover = measure_failover(cluster, args.failover_trials)
    st = summarize(list(failover))
    result = {
        "throughput": throughput,
        "failover_s": {
            "trials": st["n"],
            "median": st["median"],
            "max": st["max"],
            "all": [round(x, 3) for x in failover],
        },
    }
    if args.json:
        print_json(args.run, result)
    else:
        print("coord bench raft (3 members, 127.0.0.1; one client process putting on the"
              " pipelined stream to the leader)")
        print("\n".join(table(result).text()))
    return 0


def table(figures: dict) -> BenchTable:
    """The table `coord bench raft` prints, from its figures (as --json gives them): a
    row per level of clients, and the failover below it."""
    rows = [[cell(r["concurrency"]), cell(r["per_s"]), cell(r["p50_ms"]), cell(r["p99_ms"])]
            for r in figures["throughput"]]
    f = figures["failover_s"]
    notes = ([f"failover after kill -9 of the leader: median {f['median']:.3f} s, max "
              f"{f['max']:.3f} s over {f['trials']} trials"] if f["trials"] else [])
    return BenchTable(["clients", "proposals/s", "p50 ms", "p99 ms"], rows, notes)
