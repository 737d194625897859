"""`coord bench scale`: how coord's footprint grows, beside etcd 3.4 driven the same way.

Two phases, each on a fresh cluster per system (coord, then etcd; never together, so each
has both cores), through the same etcd-v3-API asyncio driver talking to the leader:

  soak  puts on one hot key for --seconds, with both systems under the same
        --auto-compaction-mode/--auto-compaction-retention; every --sample-s it prints
        each member's RSS and data-dir bytes. Flat memory means bounded history.
  keys  grows the key space to --keys distinct keys (100-byte values, 100 puts per txn
        so a million keys load in minutes on both systems); at every decade
        it prints RSS per member, RSS bytes per key, disk, and put/get p50/p99 from
        --probe-ops ops at that size.
  restart  grows the key space the same way and at every decade times (1) kill -9 of
        every member, then exec of all of them, to the first linearizable Range answered
        by any member, and (2) a follower replaced by an empty one (removed, its data dir
        deleted, added back as a learner, then promoted again), from its exec to its own
        Status reporting the leader's revision: restart and catch-up time per key count.

Figures only, nothing asserted; the box is shared, so print `uptime` beside them."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from coord.bench.footprint import dir_bytes, mib, rss_bytes
from coord.bench.startup import PROBE_OPTIONS
from coord.bench.stats import latency_ms
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster

VALUE = b"v" * 100
PHASES = ("soak", "keys", "restart")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Running:
    """A started cluster, seen the same way whichever system it is."""

    system: str
    leader: str  # client endpoint
    pids: dict[str, int]
    data_dirs: dict[str, Path]

    def footprint(self) -> dict:
        rss = {n: rss_bytes(p) for n, p in self.pids.items()}
        disk = {n: dir_bytes(d) for n, d in self.data_dirs.items()}
        return {"rss": rss, "disk": disk, "rss_max": max(rss.values()),
                "disk_max": max(disk.values())}


@contextmanager
def running(system: str, members: int, compaction: list[str]) -> Iterator[Running]:
    if system == "coord":
        with LocalCluster(members, extra_args=compaction) as cluster:
            leader = cluster.members[cluster.wait_for_leader(timeout=20)].listen
            yield Running("coord", leader,
                          {n: m.proc.pid for n, m in cluster.members.items() if m.proc},
                          {n: m.data_dir for n, m in cluster.members.items()})
        return
    with EtcdCluster(members, extra_args=compaction) as etcd:
        leader = etcd.wait_leader()
        yield Running("etcd", leader, {n: p.pid for n, p in etcd.procs.items()},
                      {n: etcd.root / n for n in etcd.names})


async def soak(run: Running, seconds: float, sample_s: float, clients: int) -> list[dict]:
    """Puts on one key for `seconds`; a footprint row every `sample_s`."""
    rows: list[dict] = []
    t0 = time.monotonic()
    puts = errors = 0
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)

        async def writer() -> None:
            nonlocal puts, errors
            while time.monotonic() - t0 < seconds:
                try:
                    await kv.Put(epb.PutRequest(key=b"soak/hot", value=VALUE), timeout=10)
                    puts += 1
                except grpc.RpcError as e:  # counted and shown: a stall is a finding
                    errors += 1
                    _log(f"  {run.system}: put failed: {e.code().name} {e.details()}")
                    await asyncio.sleep(0.1)

        tasks = [asyncio.ensure_future(writer()) for _ in range(clients)]
        try:
            while time.monotonic() - t0 < seconds:
                await asyncio.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - t0))))
                row = {"system": run.system, "t_s": round(time.monotonic() - t0, 1),
                       "puts": puts, "errors": errors, **run.footprint()}
                rows.append(row)
                _log(f"  {run.system} t={row['t_s']:7.1f}s puts={puts:9d} errors={errors} "
                     f"rss MiB {' '.join(mib(v) for v in row['rss'].values())} "
                     f"disk MiB {' '.join(mib(v) for v in row['disk'].values())}")
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return rows


def decades(total: int) -> list[int]:
    """1000, 10000, ... up to `total` (and `total` itself)."""
    out, n = [], 1000
    while n < total:
        out.append(n)
        n *= 10
    return [*out, total]


RETRIES = 50
LOAD_BATCH = 100  # keys per txn while growing the key space (etcd allows 128 ops)


async def _retrying(call: Callable[[], Awaitable[object]], errors: list[int]) -> None:
    """`call()` until it succeeds (puts of a fixed value and reads are safe to repeat);
    each failure is counted in errors[0] and shown, the 50th is raised."""
    for attempt in range(RETRIES):
        try:
            await call()
            return
        except grpc.RpcError as e:
            errors[0] += 1
            _log(f"  call failed ({e.code().name}: {e.details()}); again")
            if attempt == RETRIES - 1:
                raise
            await asyncio.sleep(0.1)


def key(i: int) -> bytes:
    return b"keys/%09d" % i


async def load(kv: erpc.KVStub, start: int, end: int, clients: int, errors: list[int]) -> None:
    """Puts keys start..end-1 as txns of LOAD_BATCH puts shared by `clients` loaders: one
    loader for `keys` and `restart`, so both systems, and both phases, load the same way."""
    todo = iter(range(start, end, LOAD_BATCH))

    async def loader() -> None:
        for first in todo:  # one txn of up to LOAD_BATCH puts: the same for both
            txn = epb.TxnRequest(success=[
                epb.RequestOp(request_put=epb.PutRequest(key=key(i), value=VALUE))
                for i in range(first, min(end, first + LOAD_BATCH))])
            await _retrying(lambda txn=txn: kv.Txn(txn, timeout=30), errors)

    await asyncio.gather(*(loader() for _ in range(clients)))


async def grow(run: Running, total: int, clients: int, probe_ops: int) -> list[dict]:
    rows: list[dict] = []
    base = run.footprint()
    written = 0
    errors = [0]
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)
        for target in decades(total):
            t0 = time.monotonic()
            await load(kv, written, target, clients, errors)
            load_s = time.monotonic() - t0
            written = target
            fp = run.footprint()
            per = max(1, probe_ops // clients)

            async def put(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await _retrying(lambda: kv.Put(epb.PutRequest(key=k, value=VALUE),
                                               timeout=10), errors)

            async def get(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await _retrying(lambda: kv.Range(epb.RangeRequest(key=k), timeout=10), errors)

            puts = await probe(put, clients, per)
            gets = await probe(get, clients, per)
            grown = max(0, fp["rss_max"] - base["rss_max"])
            row = {"system": run.system, "keys": target, "load_per_s": (target - (rows[-1][
                "keys"] if rows else 0)) / load_s, **fp, "bytes_per_key": grown / target,
                "put_p50_ms": puts["p50_ms"], "put_p99_ms": puts["p99_ms"],
                "get_p50_ms": gets["p50_ms"], "get_p99_ms": gets["p99_ms"], "errors": errors[0]}
            rows.append(row)
            _log(f"  {run.system} {target:>9d} keys: rss max {mib(fp['rss_max'])} MiB "
                 f"({row['bytes_per_key']:.0f} B/key), disk max {mib(fp['disk_max'])} MiB, "
                 f"put p99 {puts['p99_ms']:.2f} ms, get p99 {gets['p99_ms']:.2f} ms")
    return rows


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


RESTART_TIMEOUT = 600.0  # seconds any one restart or catch-up may take before the run fails


class _CoordRig:
    """The restart phase's moves on a coord LocalCluster (real `coord serve` processes)."""

    system = "coord"

    def __init__(self, members: int, extra_args: list[str]) -> None:
        self.cluster = LocalCluster(members, extra_args=extra_args)
        self.names = list(self.cluster.members)

    def __enter__(self) -> _CoordRig:
        self.cluster.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.stop()

    def endpoint(self, name: str) -> str:
        return self.cluster.members[name].listen

    def leader(self) -> str:
        return self.cluster.wait_for_leader(timeout=RESTART_TIMEOUT)

    def disk_max(self) -> int:
        return max(dir_bytes(m.data_dir) for m in self.cluster.members.values())

    def kill_all_and_exec(self) -> float:
        for name in self.names:
            self.cluster.kill(name)
        started = time.monotonic()
        for name in self.names:
            self.cluster.start_member(name, wait=False)
        return started

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

    system = "etcd"

    def __init__(self, members: int, extra_args: list[str]) -> None:
        self.etcd = EtcdCluster(members, extra_args=extra_args)
        self.names = list(self.etcd.names)

    def __enter__(self) -> _EtcdRig:
        self.etcd.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.etcd.stop()

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
            try:
                st = stub.Status(epb.StatusRequest(), timeout=1, wait_for_ready=True)
                if st.header.revision >= revision:
                    return time.monotonic() - t0
            except grpc.RpcError:
                pass
            time.sleep(0.01)
    raise RuntimeError(f"{endpoint} did not reach revision {revision} within {timeout:g}s")


async def _load_on(endpoint: str, start: int, end: int, clients: int,
                   errors: list[int]) -> None:
    async with grpc.aio.insecure_channel(endpoint) as ch:
        await load(erpc.KVStub(ch), start, end, clients, errors)


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
    rig = _CoordRig if system == "coord" else _EtcdRig
    with rig(members, compaction) as r:
        for target in decades(total):
            t0 = time.monotonic()
            asyncio.run(_load_on(r.endpoint(r.leader()), written, target, clients, errors))
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
            _log(f"  {system} {target:>9d} keys (rev {revision}, disk max {mib(disk)} MiB): "
                 f"kill -9 all to serving {serving_s:.2f} s, wiped {follower} caught up in "
                 f"{catchup_s:.2f} s")
    return rows


def restart_table(rows: list[dict]) -> list[str]:
    lines = ["system      keys  load/s  disk MiB   revision  restart->serving s  "
             "wiped catch-up s  errors"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['keys']:>9d} {r['load_per_s']:7.0f} "
                     f"{mib(r['disk_max']):>9} {r['revision']:>10d} "
                     f"{r['restart_serving_s']:19.2f} {r['catchup_s']:17.2f} "
                     f"{r.get('errors', 0):7d}")
    etcd = {r["keys"]: r for r in rows if r["system"] == "etcd"}
    for r in rows:
        e = etcd.get(r["keys"])
        if r["system"] == "coord" and e:
            lines.append(f"at {r['keys']} keys coord/etcd: restart to serving "
                         f"{r['restart_serving_s'] / max(e['restart_serving_s'], 1e-9):.2f}x, "
                         f"wiped catch-up {r['catchup_s'] / max(e['catchup_s'], 1e-9):.2f}x")
    return lines


def soak_table(rows: list[dict]) -> list[str]:
    lines = ["system    t_s       puts errors  rss MiB (per member)         "
             "disk MiB (per member)"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['t_s']:7.1f} {r['puts']:9d} {r['errors']:6d}  "
                     f"{' '.join(f'{mib(v):>7}' for v in r['rss'].values()):27}  "
                     f"{' '.join(f'{mib(v):>7}' for v in r['disk'].values())}")
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        half = mine[len(mine) // 2:]
        if len(half) >= 2:
            lo, hi = min(r["rss_max"] for r in half), max(r["rss_max"] for r in half)
            lines.append(f"{system}: max-member RSS over the second half of the soak "
                         f"{mib(lo)}..{mib(hi)} MiB ({(hi - lo) / max(lo, 1) * 100:+.1f}%)")
    return lines


def keys_table(rows: list[dict]) -> list[str]:
    lines = ["system      keys  load/s  rss MiB  B/key  disk MiB  put p50/p99 ms  get p50/p99 ms"
             "  errors"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['keys']:>9d} {r['load_per_s']:7.0f} "
                     f"{mib(r['rss_max']):>8} {r['bytes_per_key']:6.0f} {mib(r['disk_max']):>9} "
                     f"{r['put_p50_ms']:6.2f}/{r['put_p99_ms']:<7.2f} "
                     f"{r['get_p50_ms']:6.2f}/{r['get_p99_ms']:<7.2f} {r.get('errors', 0):7d}")
    etcd = {r["keys"]: r for r in rows if r["system"] == "etcd"}
    for r in rows:
        e = etcd.get(r["keys"])
        if r["system"] == "coord" and e and e["bytes_per_key"] > 0:
            lines.append(f"at {r['keys']} keys coord/etcd: RSS per key "
                         f"{r['bytes_per_key'] / e['bytes_per_key']:.2f}x, put p99 "
                         f"{r['put_p99_ms'] / max(e['put_p99_ms'], 1e-9):.2f}x")
    return lines


def run_scale_bench(args: argparse.Namespace) -> int:
    phases = [p for p in args.phases.split(",") if p]
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise SystemExit(f"coord bench scale: unknown phase(s) {bad}; choose from {PHASES}")
    systems = ["coord", "etcd"] if args.etcd else ["coord"]
    compaction = ["--auto-compaction-mode", args.auto_compaction_mode,
                  "--auto-compaction-retention", args.auto_compaction_retention]
    clients = max(int(x) for x in args.concurrency.split(",") if x)
    out: dict[str, list[dict]] = {"soak": [], "keys": [], "restart": []}
    for phase in phases:
        for system in systems:
            _log(f"{phase}: a {args.members}-member {system} on 127.0.0.1 "
                 f"({' '.join(compaction)}) ...")
            if phase == "restart":
                out["restart"] += restart(system, args.members, compaction, args.keys,
                                          clients)
                continue
            with running(system, args.members, compaction) as run:
                if phase == "soak":
                    out["soak"] += asyncio.run(soak(run, args.seconds, args.sample_s, clients))
                else:
                    out["keys"] += asyncio.run(grow(run, args.keys, clients, args.probe_ops))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"coord bench scale: {args.members} member(s) per cluster on 127.0.0.1, "
          f"{clients} clients, {' '.join(compaction)}")
    if out["soak"]:
        print(f"soak: puts of {len(VALUE)} B on one key for {args.seconds:g} s")
        for line in soak_table(out["soak"]):
            print("  " + line)
    if out["keys"]:
        print(f"keys: {args.keys} distinct keys of {len(VALUE)} B values, "
              f"{args.probe_ops} probe ops per decade")
        for line in keys_table(out["keys"]):
            print("  " + line)
    if out["restart"]:
        print(f"restart: at each decade up to {args.keys} keys, kill -9 of every member to "
              "the first linearizable Range; a follower wiped and re-added to its Status at "
              "the leader's revision")
        for line in restart_table(out["restart"]):
            print("  " + line)
    return 0
