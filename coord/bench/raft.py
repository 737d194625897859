"""`coord bench raft`: replicated-log throughput and leader failover on a real 3-member
loopback cluster. Prints figures; asserts nothing.

Throughput runs the proposers inside the leader, so it measures the log — batching,
fsync, replication, apply — and not the Python gRPC client stack: every member is
`python -m coord.bench.raft_member`, a normal member plus the RaftBench service on a
port of its own, and the benchmark asks the leader's. Failover is measured from
outside: kill -9 the leader, then time until a write commits again."""

from __future__ import annotations

import argparse
import json
import sys
import time

import grpc

from coord.bench import raft_bench_pb2 as pb
from coord.bench import raft_bench_pb2_grpc as rpc
from coord.bench.stats import summarize
from coord.testing import LocalCluster
from coord.testing.ports import free_ports


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class BenchCluster(LocalCluster):
    """A LocalCluster (not started) whose members are benchmark members, each serving
    RaftBench on `bench_listen[name]`, a port distinct from the cluster's own: of
    `members + taken` free ports, at least `members` are not among the `taken`."""

    def __init__(self, members: int = 3) -> None:
        self.bench_listen: dict[str, str] = {}
        super().__init__(members, member_command=self._bench_member)
        taken = {int(a.rsplit(":", 1)[1])
                 for m in self.members.values() for a in (m.listen, m.peer_listen)}
        ports = [p for p in free_ports(members + len(taken)) if p not in taken]
        self.bench_listen.update(
            {name: f"127.0.0.1:{port}" for name, port in zip(self.members, ports, strict=False)}
        )

    def _bench_member(self, name: str) -> list[str]:
        return [sys.executable, "-m", "coord.bench.raft_member",
                "--bench-listen", self.bench_listen[name]]

    def propose_load(self, name: str, concurrency: int,
                     duration_ms: int) -> pb.ProposeLoadResponse:
        """`concurrency` proposers inside member `name` for `duration_ms`."""
        with grpc.insecure_channel(self.bench_listen[name]) as channel:
            return rpc.RaftBenchStub(channel).ProposeLoad(
                pb.ProposeLoadRequest(concurrency=concurrency, duration_ms=duration_ms),
                timeout=duration_ms / 1000 + 30)


def measure_throughput(cluster: BenchCluster, levels: list[int], seconds: float) -> list[dict]:
    leader = cluster.wait_for_leader(timeout=15)
    rows = []
    cluster.propose_load(leader, 16, 1000)  # warm-up
    for n in levels:
        _log(f"throughput: {n} concurrent proposers for {seconds:.0f}s on leader {leader} ...")
        r = cluster.propose_load(leader, n, int(seconds * 1000))
        rows.append(
            {
                "concurrency": n,
                "committed": r.committed,
                "per_s": r.committed / r.seconds,
                "p50_ms": r.p50_ms,
                "p99_ms": r.p99_ms,
            }
        )
        _log(
            f"  {rows[-1]['per_s']:9.0f} proposals/s  p50 {r.p50_ms:6.2f} ms"
            f"  p99 {r.p99_ms:6.2f} ms"
        )
    return rows


def _first_write(cluster: LocalCluster, names: list[str], deadline: float) -> float | None:
    """Poll the survivors with small writes until one commits; return when it did."""
    clients = {n: cluster.client(n, timeout=0.5) for n in names}
    try:
        while time.monotonic() < deadline:
            for c in clients.values():
                try:
                    c.propose(b"failover-probe", timeout=0.5)
                    return time.monotonic()
                except grpc.RpcError:
                    pass
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
            _log(f"failover trial {trial + 1}: no write committed within 20 s")
            continue
        times.append(t1 - t0)
        _log(f"failover trial {trial + 1}/{trials}: killed {leader}, write ok after {t1 - t0:.3f}s")
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
    _log("starting a 3-member cluster on 127.0.0.1 (default timeouts) ...")
    with BenchCluster(3) as cluster:
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
        print(json.dumps(result, indent=2))
    else:
        print("coord bench raft (3 members, 127.0.0.1, proposers inside the leader)")
        print(f"{'proposers':>10} {'proposals/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
        for r in throughput:
            print(
                f"{r['concurrency']:>10} {r['per_s']:>12.0f}"
                f" {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
            )
        f = result["failover_s"]
        if f["trials"]:
            print(
                f"failover after kill -9 of the leader: median {f['median']:.3f}s,"
                f" max {f['max']:.3f}s over {f['trials']} trials"
            )
    return 0
