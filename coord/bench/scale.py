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
from coord.bench.stats import latency_ms
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster

VALUE = b"v" * 100
PHASES = ("soak", "keys")


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


async def grow(run: Running, total: int, clients: int, probe_ops: int) -> list[dict]:
    rows: list[dict] = []
    base = run.footprint()
    written = 0
    errors = [0]
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)
        for target in decades(total):
            t0 = time.monotonic()
            todo = iter(range(written, target, LOAD_BATCH))

            async def loader(todo: Iterator[int] = todo, target: int = target) -> None:
                for first in todo:  # one txn of up to LOAD_BATCH puts: the same for both
                    txn = epb.TxnRequest(success=[
                        epb.RequestOp(request_put=epb.PutRequest(key=b"keys/%09d" % i,
                                                                 value=VALUE))
                        for i in range(first, min(target, first + LOAD_BATCH))])
                    await _retrying(lambda txn=txn: kv.Txn(txn, timeout=30), errors)

            await asyncio.gather(*(loader() for _ in range(clients)))
            load_s = time.monotonic() - t0
            written = target
            fp = run.footprint()
            per = max(1, probe_ops // clients)

            async def put(w: int, i: int, per: int = per, target: int = target) -> None:
                key = b"keys/%09d" % ((w * per + i) % target)
                await _retrying(lambda: kv.Put(epb.PutRequest(key=key, value=VALUE),
                                               timeout=10), errors)

            async def get(w: int, i: int, per: int = per, target: int = target) -> None:
                key = b"keys/%09d" % ((w * per + i) % target)
                await _retrying(lambda: kv.Range(epb.RangeRequest(key=key), timeout=10), errors)

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
    out: dict[str, list[dict]] = {"soak": [], "keys": []}
    for phase in phases:
        for system in systems:
            _log(f"{phase}: a {args.members}-member {system} on 127.0.0.1 "
                 f"({' '.join(compaction)}) ...")
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
    return 0
