"""`coord bench scale --phases restart`: restart and catch-up time per key count, beside
etcd.

The key space grows as in the keys phase, and at every decade it times (1) kill -9 of
every member, then exec of all of them, to the first linearizable Range answered by any
member, and (2) a follower replaced by an empty one (removed, its data dir deleted, added
back as a learner, then promoted again), from its exec to its own Status reporting the
leader's revision.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import grpc

from coord.bench.footprint import dir_bytes, mib
from coord.bench.scale_common import beside_etcd, decades, key, load, log
from coord.bench.startup import PROBE_OPTIONS
from coord.bench.tables import BenchTable
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster

RESTART_TIMEOUT = 600.0  # seconds any one restart or catch-up may take before the run fails


class _CoordRig:
    """The restart phase's moves on a coord LocalCluster (real `coord serve` processes)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster, self.names = cluster, list(cluster.members)

    def endpoint(self, name: str) -> str:
        return self.cluster.members[name].listen

    def leader(self) -> str:
        return self.cluster.wait_for_leader(timeout=RESTART_TIMEOUT)

    def disk_max(self) -> int:
        return max(dir_bytes(m.data_dir) for m in self.cluster.members.values())

    def kill_all_and_exec(self) -> float:
        return self.cluster.restart_all(wait=False)

    def settle(self) -> None:
        for name in self.names:
            self.cluster.wait_serving(name, timeout=RESTART_TIMEOUT)
        self.leader()

    def rejoin(self, name: str) -> float:
        return self.cluster.rejoin_member(name, timeout=60, wait=False)

    def promote(self, name: str) -> None:
        self.cluster.promote(name, timeout=60)


class _EtcdRig:
    """The same moves on an EtcdCluster (etcd 3.4 processes, etcdctl for membership)."""

    def __init__(self, etcd: EtcdCluster) -> None:
        self.etcd, self.names = etcd, list(etcd.names)

    def endpoint(self, name: str) -> str:
        return f"127.0.0.1:{self.etcd.client_ports[name]}"

    def leader(self) -> str:
        endpoint = self.etcd.wait_leader(timeout=RESTART_TIMEOUT)
        return next(n for n in self.names if self.endpoint(n) == endpoint)

    def disk_max(self) -> int:
        return max(dir_bytes(self.etcd.root / n) for n in self.names)

    def kill_all_and_exec(self) -> float:
        for name in self.names:
            self.etcd.kill(name)
        started = time.monotonic()
        for name in self.names:
            self.etcd.start_member(name)
        return started

    def settle(self) -> None:
        self.leader()
        for name in self.names:
            _status(self.endpoint(name), RESTART_TIMEOUT)

    def rejoin(self, name: str) -> float:
        return self.etcd.wipe_and_rejoin(name, timeout=60)

    def promote(self, name: str) -> None:
        self.etcd.promote(name, timeout=60)


def _status(endpoint: str, timeout: float) -> epb.StatusResponse:
    """The member's own Status (its applied revision in the header), once it answers."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
        stub = erpc.MaintenanceStub(ch)
        while True:
            try:
                return stub.Status(epb.StatusRequest(), timeout=1, wait_for_ready=True)
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


async def first_read(endpoints: list[str], k: bytes, t0: float, timeout: float) -> float:
    """Seconds from `t0` until any of `endpoints` answers a linearizable Range of `k`
    (one probe loop per member, so a member still electing does not delay the one that
    serves). A member that answers without `k` is a lost write, and fails the run."""
    deadline = t0 + timeout

    async def one(endpoint: str) -> float:
        async with grpc.aio.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
            kv = erpc.KVStub(ch)
            while time.monotonic() < deadline:
                try:
                    res = await kv.Range(epb.RangeRequest(key=k), timeout=1,
                                         wait_for_ready=True)
                except grpc.RpcError:
                    await asyncio.sleep(0.01)  # refused, or no leader yet
                    continue
                if not res.kvs:
                    raise RuntimeError(f"{endpoint} read {k!r} linearizably without it")
                return time.monotonic() - t0
        raise TimeoutError(endpoint)

    tasks = [asyncio.ensure_future(one(e)) for e in endpoints]
    try:
        for fut in asyncio.as_completed(tasks):
            try:
                return await fut
            except TimeoutError:
                continue
        raise RuntimeError(f"no member served a linearizable read within {timeout:g}s")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def caught_up(endpoint: str, revision: int, t0: float, timeout: float) -> float:
    """Seconds from `t0` until the member at `endpoint` has applied `revision` (its own
    Status, answered from its local state: a learner answers it too)."""
    deadline = t0 + timeout
    with grpc.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
        stub = erpc.MaintenanceStub(ch)
        while time.monotonic() < deadline:
            with contextlib.suppress(grpc.RpcError):
                st = stub.Status(epb.StatusRequest(), timeout=1, wait_for_ready=True)
                if st.header.revision >= revision:
                    return time.monotonic() - t0
            time.sleep(0.01)
    raise RuntimeError(f"{endpoint} did not reach revision {revision} within {timeout:g}s")


async def load_on(endpoint: str, start: int, end: int, clients: int,
                  errors: list[int], random_values: bool = False) -> None:
    async with grpc.aio.insecure_channel(endpoint) as ch:
        await load(erpc.KVStub(ch), start, end, clients, errors,
                   random_values=random_values)


def restart(system: str, members: int, compaction: list[str], total: int,
            clients: int) -> list[dict]:
    """At each decade of keys up to `total`, on one fresh cluster: restart-to-serving
    after kill -9 of every member, then a wiped follower's catch-up (promoted again
    afterwards, so the next decade starts from the same 3 voters)."""
    if members < 3:
        raise SystemExit("coord bench scale: the restart phase needs --members 3 or more "
                         "(a wiped follower catches up from a quorum of the others)")
    rows: list[dict] = []
    errors = [0]
    written = 0
    coord = system == "coord"
    with (LocalCluster if coord else EtcdCluster)(members, extra_args=compaction) as cluster:
        r = _CoordRig(cluster) if coord else _EtcdRig(cluster)
        for target in decades(total):
            t0 = time.monotonic()
            asyncio.run(load_on(r.endpoint(r.leader()), written, target, clients, errors))
            load_s = time.monotonic() - t0
            loaded, written = target - written, target
            disk = r.disk_max()
            exec_at = r.kill_all_and_exec()
            serving_s = asyncio.run(first_read([r.endpoint(n) for n in r.names], key(0),
                                               exec_at, RESTART_TIMEOUT))
            r.settle()
            leader = r.leader()
            revision = _status(r.endpoint(leader), 30).header.revision
            follower = next(n for n in r.names if n != leader)
            exec_at = r.rejoin(follower)
            catchup_s = caught_up(r.endpoint(follower), revision, exec_at, RESTART_TIMEOUT)
            r.promote(follower)
            row = {"system": system, "keys": target, "load_per_s": loaded / load_s,
                   "disk_max": disk, "revision": revision, "restart_serving_s": serving_s,
                   "catchup_s": catchup_s, "errors": errors[0]}
            rows.append(row)
            log(f"  {system} {target:>9d} keys (rev {revision}, disk max {mib(disk)} MiB): "
                 f"kill -9 all to serving {serving_s:.2f} s, wiped {follower} caught up in "
                 f"{catchup_s:.2f} s")
    return rows


def restart_table(rows: list[dict]) -> BenchTable:
    """A row per system and decade; below, coord/etcd at each decade both reached."""
    return BenchTable(
        ["system", "keys", "load/s", "disk MiB", "revision", "restart->serving s",
         "wiped catch-up s", "errors"],
        [[r["system"], f"{r['keys']:,}", f"{r['load_per_s']:,.0f}", mib(r["disk_max"]),
          f"{r['revision']:,}", f"{r['restart_serving_s']:.2f}", f"{r['catchup_s']:.2f}",
          str(r.get("errors", 0))] for r in rows],
        [f"at {r['keys']:,} keys coord/etcd: restart to serving "
         f"{r['restart_serving_s'] / max(e['restart_serving_s'], 1e-9):.2f}x, "
         f"wiped catch-up {r['catchup_s'] / max(e['catchup_s'], 1e-9):.2f}x"
         for r, e in beside_etcd(rows, "keys")])
