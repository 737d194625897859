"""What the phases of `coord bench scale` share: a running cluster of either system
seen one way, the decades a phase grows by, the keys the keys and restart phases load,
retried calls and latency probes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from coord.bench import log
from coord.bench.footprint import dir_bytes, logged_snapshots, rss_bytes
from coord.bench.stats import latency_ms
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.progress_bars import Step
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster
from coord.v1 import admin_pb2, admin_pb2_grpc


@dataclass
class Running:
    """A started cluster, seen the same way whichever system it is."""

    system: str
    leader: str  # client endpoint
    pids: dict[str, int]
    data_dirs: dict[str, Path]
    leader_name: str = ""
    endpoints: dict[str, str] = field(default_factory=dict)  # every member's, by name
    logs: dict[str, Path] = field(default_factory=dict)  # coord members' logs, by name

    def last_snapshot(self) -> dict | None:
        """The newest snapshot a coord member logged ("took a snapshot of N bytes at index
        I in S s", server/node/snapshots.py), the leader's if it took one: None for etcd, or
        before any."""
        found = {}
        for name, path in self.logs.items():
            hits = logged_snapshots(path)
            if hits:
                size, index, seconds = hits[-1]
                found[name] = {"snapshot_bytes": size, "snapshot_index": index,
                               "snapshot_s": seconds}
        if not found:
            return None
        return found.get(self.leader_name) or max(found.values(),
                                                  key=lambda f: f["snapshot_index"])

    def footprint(self) -> dict:
        rss = {n: rss_bytes(p) for n, p in self.pids.items()}
        disk = {n: dir_bytes(d) for n, d in self.data_dirs.items()}
        return {"rss": rss, "disk": disk, "rss_max": max(rss.values()),
                "disk_max": max(disk.values())}


@contextmanager
def running(system: str, members: int, compaction: list[str]) -> Iterator[Running]:
    if system == "coord":
        with LocalCluster(members, extra_args=compaction) as cluster:
            name = cluster.wait_for_leader(timeout=20)
            yield Running("coord", cluster.members[name].listen,
                          {n: m.proc.pid for n, m in cluster.members.items() if m.proc},
                          {n: m.data_dir for n, m in cluster.members.items()}, name,
                          {n: m.listen for n, m in cluster.members.items()},
                          {n: m.log_path for n, m in cluster.members.items()})
        return
    with EtcdCluster(members, extra_args=compaction) as etcd:
        leader = etcd.wait_leader()
        name = next(n for n in etcd.names if f"127.0.0.1:{etcd.client_ports[n]}" == leader)
        yield Running("etcd", leader, {n: p.pid for n, p in etcd.procs.items()},
                      {n: etcd.root / n for n in etcd.names}, name,
                      {n: f"127.0.0.1:{etcd.client_ports[n]}" for n in etcd.names})


def beside_etcd(rows: list[dict], size: str) -> list[tuple[dict, dict]]:
    """(coord's row, etcd's row) at each `size` (a row's "keys", "sessions") both systems
    were measured at: what a table's coord/etcd lines compare."""
    etcd = {r[size]: r for r in rows if r["system"] == "etcd"}
    return [(r, etcd[r[size]]) for r in rows if r["system"] == "coord" and r[size] in etcd]


def decades(total: int) -> list[int]:
    """1000, 10000, ... up to `total` (and `total` itself)."""
    out, n = [], 1000
    while n < total:
        out.append(n)
        n *= 10
    return [*out, total]


RETRIES = 50
T = TypeVar("T")

async def retrying(call: Callable[[], Awaitable[T]], errors: list[int]) -> T:
    """`call()` until it succeeds (puts of a fixed value, reads, and writes with a
    request id are safe to repeat); each failure is counted in errors[0] and shown, the
    50th is raised."""
    for attempt in range(RETRIES):
        try:
            return await call()
        except grpc.RpcError as e:
            errors[0] += 1
            log(f"  call failed ({e.code().name}: {e.details()}); again")
            if attempt == RETRIES - 1:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def probe(op: Callable[[int, int], Awaitable[object]], clients: int, per: int) -> dict:
    """p50/p99 of `per` calls of `op(worker, i)` by each of `clients` workers."""
    latencies: list[float] = []

    async def worker(w: int) -> None:
        for i in range(per):
            t0 = time.perf_counter()
            await op(w, i)
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker(w) for w in range(clients)))
    return latency_ms(latencies)


async def machine_state(endpoint: str) -> dict:
    """A member's state machine as its Status describes it (counts of owned resources,
    pid leases, ...): what a phase checks its own counts against."""
    async with grpc.aio.insecure_channel(endpoint) as ch:
        st = await admin_pb2_grpc.AdminStub(ch).Status(admin_pb2.StatusRequest(), timeout=30)
    return json.loads(st.state_machine)


VALUE = b"v" * 100
LOAD_BATCH = 100  # keys per txn while growing the key space (etcd allows 128 ops)


def key(i: int) -> bytes:
    return b"keys/%09d" % i


async def load(kv: erpc.KVStub, start: int, end: int, clients: int, errors: list[int],
               step: Step | None = None, random_values: bool = False) -> None:
    """Puts keys start..end-1 as txns of LOAD_BATCH puts shared by `clients` loaders: one
    loader for `keys` and `restart`, so both systems, and both phases, load the same way;
    `step(n)` hears of each txn's n keys. `random_values`: each value VALUE's length of
    random bytes, which do not compress, instead of VALUE."""
    todo = iter(range(start, end, LOAD_BATCH))

    async def loader() -> None:
        for first in todo:  # one txn of up to LOAD_BATCH puts: the same for both
            txn = epb.TxnRequest(success=[
                epb.RequestOp(request_put=epb.PutRequest(
                    key=key(i), value=os.urandom(len(VALUE)) if random_values else VALUE))
                for i in range(first, min(end, first + LOAD_BATCH))])
            await retrying(lambda txn=txn: kv.Txn(txn, timeout=30), errors)
            if step is not None:
                step(len(txn.success))

    await asyncio.gather(*(loader() for _ in range(clients)))
