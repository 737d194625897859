"""`coord bench startup`: how soon a fresh single member serves its first request, coord
and etcd 3.4 side by side in one run — what a test rig waits for before every test
that starts its own server. Timed from exec (or, in-process, from the `cluster()` call)
to the first Put that succeeds through the etcd v3 API. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc

from coord.bench import log
from coord.bench.run_record import print_json
from coord.bench.stats import ratio, summarize
from coord.bench.tables import BenchTable, cell
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import cluster
from coord.testing.peer_etcd import EtcdCluster
from coord.testing.ports import free_port
from coord.testing.processes import stop_processes

# A refused connection must not park the probe in gRPC's default 1 s reconnect backoff:
# the figure is the server's start-up, not the client's back-off.
PROBE_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 5),
    ("grpc.min_reconnect_backoff_ms", 5),
    ("grpc.max_reconnect_backoff_ms", 20),
]


def first_put(endpoint: str, t0: float, timeout: float = 30.0) -> float:
    """Seconds from `t0` until a Put on `endpoint` succeeds."""
    deadline = t0 + timeout
    with grpc.insecure_channel(endpoint, options=PROBE_OPTIONS) as channel:
        kv = erpc.KVStub(channel)
        while time.monotonic() < deadline:
            try:
                kv.Put(epb.PutRequest(key=b"startup", value=b"1"), timeout=0.25,
                       wait_for_ready=True)
                return time.monotonic() - t0
            except grpc.RpcError:
                time.sleep(0.002)  # not yet: a refused connection or no leader yet
    raise RuntimeError(f"{endpoint} served no Put within {timeout:g}s")


def _process(command: list[str], endpoint: str) -> float:
    t0 = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return first_put(endpoint, t0)
    finally:
        stop_processes([proc])


def coord_process() -> float:
    endpoint = f"127.0.0.1:{free_port()}"
    return _process([sys.executable, "-m", "coord", "serve", "--etcd-only", "--listen",
                     endpoint, "--log-level", "warning"], endpoint)


def coord_in_process() -> float:
    t0 = time.monotonic()
    with cluster(members=1, in_process=True) as c:
        return first_put(c.etcd_endpoints[0], t0)


def etcd_process() -> float:
    etcd = EtcdCluster(1)
    try:
        return _process(etcd.command(etcd.names[0]), etcd.endpoints[0])
    finally:
        etcd.stop()


SYSTEMS: dict[str, Callable[[], float]] = {
    "coord serve --etcd-only (process)": coord_process,
    "coord.testing.cluster(in_process=True)": coord_in_process,
    "etcd 3.4 (process)": etcd_process,
}


def _row(system: str, times: list[float]) -> dict[str, Any]:
    """One system's line: its median, max and min start-up over the trials, in ms."""
    st = summarize(list(times))
    return {"system": system, "trials": st["n"], "median_ms": st["median"] * 1000,
            "max_ms": st["max"] * 1000, "min_ms": min(times) * 1000}


def run_startup_bench(args: argparse.Namespace) -> int:
    coord_in_process()  # warm-up: imports and the shared loop, paid once per test session
    times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    for trial in range(args.trials):
        for name, start in SYSTEMS.items():  # interleaved, so drift hits all alike
            times[name].append(start())
        log(f"trial {trial + 1}/{args.trials}: " + ", ".join(
            f"{name.split()[0]} {t[-1] * 1000:.0f} ms" for name, t in times.items()))
    rows = [_row(name, t) for name, t in times.items()]
    if args.json:
        print_json(args.run, rows)
        return 0
    print(f"start-up of one fresh member, exec -> first served Put (etcd v3 API), "
          f"{args.trials} trials each, interleaved")
    for line in table({"rows": rows}).text():
        print("  " + line)
    return 0


def table(figures: dict) -> BenchTable:
    """The table `coord bench startup` prints, from its figures (as --json gives them):
    a row per system, its median beside etcd's (the last row)."""
    rows = figures["rows"]
    etcd_median = rows[-1]["median_ms"]
    return BenchTable(["system", "median ms", "min", "max", "/etcd"], [
        [r["system"], cell(r["median_ms"]), cell(r["min_ms"]), cell(r["max_ms"]),
         cell(ratio(r["median_ms"], etcd_median))] for r in rows])
