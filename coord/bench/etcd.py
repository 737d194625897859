"""`coord bench etcd`: coord and a real etcd 3.4 side by side, in one run, on this box.

Both get a fresh cluster of `--members` (default 3) on 127.0.0.1 and the same asyncio
driver over the etcd v3 API, talking to the leader: puts, linearizable gets, and create-if-absent
claims (a Txn per key, 10,000 keys bound to one lease — the partition-lease pattern).
coord's native KV API is measured in the same run too: unary calls (`native`), and the
client library on its pipelined stream (`stream`: put, get, and a single-resource `own`
per claim, coord's own claim), each beside etcd's etcd-API figure, and one native own
of `--resources` (10,000) resources in a single request (`ownall`, coord's alone: etcd
has no such call). Last, the same driver
runs against the gRPC floor (`coord.bench.grpc_floor`: a Python server answering each
call at once), the most any Python unary server does here. The clusters run one after the
other, never together, so each has both cores; the ratio column is what carries over
to other machines. coord runs plaintext first; `--tls` runs it again serving TLS with
client certificates on both ports (its clients speaking TLS), and `--auth` again with
authentication on (plaintext; its clients logged in as a user that is not root, so each
call is checked: `coord.bench.bench_auth`), each in the same run, and prints every coord
row beside the plaintext one with the ratio: what TLS and auth cost. `--metrics` does
the same with every member serving /metrics (--listen-metrics-urls), each scraped every
second as Prometheus would. Prints figures; asserts nothing."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import grpc

from coord.bench import bench_auth, log
from coord.bench.api import bench_kv, metered, own_in_one_request, timed_level
from coord.bench.flame import Profiler
from coord.bench.grpc_floor import floor_server
from coord.bench.member_cpu import Meter, member_meter
from coord.bench.round_table import round_table
from coord.bench.run_record import print_json
from coord.bench.tables import BenchTable, printed
from coord.client import AsyncClient
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.progress_bars import Phases, Step, on_terminal
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster
from coord.tls.credentials import aio_channel, channel_credentials
from coord.tls.files import TLS

MAX_TRIES = 100
OWN_ALL_TIMES = 3  # one-request owns per variant: one request alone is one sample


async def etcd_ops(endpoint: str, system: str, levels: list[int], seconds: float,
                   claims: int, phases: Phases, meter: Meter | None = None,
                   tls: TLS | None = None, token: str = "",
                   profile: Callable[[str], Profiler] | None = None) -> list[dict]:
    """The same driver for both systems: the etcd v3 API on `endpoint` (claims only
    if `claims`: the gRPC floor serves no leases), over TLS with `tls`, as `token`'s
    user. `profile(name)`: what records the members during the put at the most
    clients."""
    rows: list[dict] = []
    async with _channel(endpoint, tls, token) as channel:
        kv, lease = erpc.KVStub(channel), erpc.LeaseStub(channel)
        for n in levels:

            async def put(w: int, i: int) -> None:
                await kv.Put(epb.PutRequest(key=f"bench/{w}/{i % 100}".encode(), value=b"x" * 16))

            async def get(w: int, i: int) -> None:
                await kv.Range(epb.RangeRequest(key=f"bench/{w}/{i % 100}".encode()))

            row = {"system": system, "api": "etcd"}
            with (profile(f"etcd-put-{n}") if profile and n == max(levels)
                  else contextlib.nullcontext()):
                rows.append(await timed_level(phases, f"{system}: etcd-API put, {n} clients",
                                              put, n, seconds, meter, **row, op="put"))
            rows.append(await timed_level(phases, f"{system}: etcd-API linearizable get, {n} "
                                          "clients", get, n, seconds, meter, **row, op="get"))
            if not claims:
                continue
            granted = await lease.LeaseGrant(epb.LeaseGrantRequest(TTL=600))
            log(f"{system}: {claims} create-if-absent claims on one lease, {n} clients ...")
            with phases.phase(f"{system} claims, {n} clients", claims, "claims") as step:
                rows.append({**row, "op": "claim",
                             **await _claims(kv, granted.ID, f"claims-{n}", claims, n, step,
                                             meter)})
            log(f"  {rows[-1]['per_s']:.0f}/s")
    return rows


async def _claims(kv: erpc.KVStub, lease_id: int, prefix: str, total: int, clients: int,
                  step: Step, meter: Meter | None = None) -> dict:
    """Claim `total` keys (each once) with `clients` workers: Txn(create == 0 → put)."""
    todo = list(range(total))
    latencies: list[float] = []
    won = unavailable = 0

    async def worker() -> None:
        nonlocal won, unavailable
        while todo:
            key = f"{prefix}/{todo.pop()}".encode()
            for _ in range(MAX_TRIES):  # an election under load: count it, try again
                t = time.perf_counter()
                try:
                    resp = await kv.Txn(epb.TxnRequest(
                        compare=[epb.Compare(result=epb.Compare.EQUAL,
                                             target=epb.Compare.CREATE,
                                             key=key, create_revision=0)],
                        success=[epb.RequestOp(request_put=epb.PutRequest(
                            key=key, value=b"owner", lease=lease_id))],
                    ))
                except grpc.aio.AioRpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    unavailable += 1
                    await asyncio.sleep(0.05)
                    continue
                latencies.append(time.perf_counter() - t)
                won += resp.succeeded
                step()
                break

    return await metered(lambda: asyncio.gather(*(worker() for _ in range(clients))),
                         clients, latencies, meter,
                         lambda: {"succeeded": won, "unavailable": unavailable})


def _channel(endpoint: str, tls: TLS | None, token: str = "") -> grpc.aio.Channel:
    if token:
        return bench_auth.token_channel(endpoint, token)
    return aio_channel(endpoint, channel_credentials(tls) if tls is not None else None)


async def coord_native(endpoint: str, levels: list[int], seconds: float,
                       phases: Phases, meter: Meter | None = None,
                       tls: TLS | None = None, token: str = "",
                       resources: int = 0) -> list[dict]:
    """coord's native KV API, unary calls; with `resources`, also `own_all`."""
    async with _channel(endpoint, tls, token) as channel:
        rows = await bench_kv(channel, levels, seconds, phases, meter)
        if resources:
            rows.append(await own_all(channel, resources, phases))
    return [{"system": "coord", "api": "native", **r} for r in rows]


async def own_all(channel: grpc.aio.Channel, resources: int, phases: Phases) -> dict:
    """The one-request own of `resources` resources, OWN_ALL_TIMES times (each a fresh
    group of a fresh session, its claims one `Claim` message each): a row of op "ownall"
    whose rate is claims per second at the median request, its p50/p99 that request's
    and the slowest one's ms."""
    seconds: list[float] = []
    with phases.phase(f"own {resources} resources in one request", OWN_ALL_TIMES,
                      "requests") as step:
        for i in range(OWN_ALL_TIMES):
            seconds.append(await own_in_one_request(channel, resources, f"claims-all-{i}",
                                                    f"bench-own-all-{i}", columns=False))
            step()
    median = statistics.median(seconds)
    return {"op": "ownall", "clients": 1, "ops": len(seconds), "resources": resources,
            "per_s": resources / median, "p50_ms": median * 1000, "p99_ms": max(seconds) * 1000}


async def coord_stream(endpoint: str, levels: list[int], seconds: float,
                       claims: int, phases: Phases, meter: Meter | None = None,
                       profile: Callable[[str], Profiler] | None = None,
                       tls: TLS | None = None, auth: bool = False) -> list[dict]:
    """coord's client library on its pipelined stream (one stream to the leader, every
    worker's requests on it): puts, linearizable gets, and `claims` single-resource
    `own` calls of one session (coord's claim; etcd needs a Txn on a lease for it).
    `profile(name)`: what records the members during the put at the most clients.
    `auth`: logged in as the bench user."""
    rows: list[dict] = []
    row = {"system": "coord", "api": "stream"}
    login = {"user": bench_auth.USER, "password": bench_auth.PASSWORD} if auth else {}
    async with AsyncClient([endpoint], stream=True, tls=tls or False, **login) as client:
        for n in levels:

            async def put(w: int, i: int) -> None:
                await client.put(f"bench/{w}/{i % 100}", b"x" * 16)

            async def get(w: int, i: int) -> None:
                await client.get(f"bench/{w}/{i % 100}")

            with (profile(f"stream-put-{n}") if profile and n == max(levels)
                  else contextlib.nullcontext()):
                rows.append(await timed_level(phases, f"coord: stream put, {n} clients", put,
                                              n, seconds, meter, **row, op="put"))
            rows.append(await timed_level(phases, f"coord: stream linearizable get, {n} "
                                          "clients", get, n, seconds, meter, **row, op="get"))
            log(f"coord: {claims} single-resource own calls, {n} clients ...")
            session = await client.open_session(f"bench-claims-{n}", ttl=600)
            with phases.phase(f"coord stream own, {n} clients", claims, "claims") as step:
                rows.append({**row, "op": "claim",
                             **await _owns(client, session.session_id, f"claims-{n}", claims,
                                           n, step, meter)})
            log(f"  {rows[-1]['per_s']:.0f}/s")
    return rows


async def _owns(client: AsyncClient, session: int, group: str, total: int,
                clients: int, step: Step, meter: Meter | None = None) -> dict:
    """Claim `total` resources (each once, one per call) with `clients` workers."""
    todo = list(range(total))
    latencies: list[float] = []
    won = 0

    async def worker() -> None:
        nonlocal won
        while todo:
            resource = f"r{todo.pop()}"
            t = time.perf_counter()
            res = await client.own(session, group, resource)
            latencies.append(time.perf_counter() - t)
            won += len(res.grants)
            step()

    return await metered(lambda: asyncio.gather(*(worker() for _ in range(clients))),
                         clients, latencies, meter, lambda: {"succeeded": won})


def _cpu(r: dict) -> str:
    cpu = r.get("cpu_us_per_op")
    if not cpu:
        return "-"
    return "/".join(f"{cpu[role]:.0f}" for role in ("leader", "follower") if role in cpu)


def _snapshots(r: dict) -> str:
    snaps = r.get("snapshots")
    if snaps is None:
        return "-"
    return f"{snaps['count']}/{snaps['seconds']:.2f}s" if snaps["count"] else "0"


def _rate(r: dict) -> list[str]:
    """ops/s, p50 and p99 ms: the three cells of one system's figure in a row."""
    return [f"{r['per_s']:,.0f}", f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"]


def comparison_table(rows: list[dict]) -> BenchTable:
    """One row per coord (op, api, clients), and the gRPC floor's: its figures, etcd's
    for the same op and clients, and coord/etcd."""
    etcd = {(r["op"], r["clients"]): r for r in rows if r["system"] == "etcd"}
    ops, apis = ["put", "get", "claim", "ownall"], ["etcd", "native", "stream", "floor"]

    def order(r: dict) -> tuple:
        return (ops.index(r["op"]) if r["op"] in ops else len(ops), r["clients"],
                apis.index(r["api"]) if r["api"] in apis else len(apis))

    mine = [r for r in rows if r["system"] == "coord"]
    mine += [{**r, "api": "floor"} for r in rows if r["system"] == "floor"]
    lines = []
    for r in sorted(mine, key=order):
        e = etcd.get((r["op"], r["clients"]))
        peer = [*_rate(e), f"{r['per_s'] / e['per_s']:.2f}"] if e else ["-"] * 4
        lines.append([r["op"], r["api"], str(r["clients"]), *_rate(r), *peer, _cpu(r),
                      _cpu(e) if e else "-", _snapshots(r)])
    return BenchTable(["op", "api", "clients", "coord/s", "p50 ms", "p99 ms", "etcd/s",
                       "p50 ms", "p99 ms", "coord/etcd", "CPU us/op leader/follower: coord",
                       "etcd", "snapshots"], lines)


VARIANTS = {"tls": "TLS (mTLS on both ports)",
            "auth": "auth on (a user that is not root, every call checked)",
            "metrics": "metrics served (each member scraped every second)"}
"""What each variant of coord's run is, said beside plaintext."""


def variants_of(rows: list[dict]) -> list[str]:
    """The variants coord ran in, plaintext first, then in the order the rows give them."""
    seen = ["plain"]
    for r in rows:
        if r.get("variant", "plain") not in seen:
            seen.append(r["variant"])
    return seen


def table(figures: dict) -> list[BenchTable]:
    """The tables `coord bench etcd` prints, from its figures (as --json gives them):
    coord beside etcd, each variant beside plaintext (when there is one), and what one
    op cost each member in steps."""
    rows = figures["rows"]
    plain = [r for r in rows if r.get("variant", "plain") == "plain"]
    variants = variants_of(rows)
    tables = [comparison_table(plain)]
    if len(variants) > 1:
        tables.append(cost_table(rows, variants))
    return [*tables, round_table(plain)]


SCRAPE_INTERVAL_S = 1.0


@contextlib.contextmanager
def scraped(cluster: LocalCluster) -> Iterator[None]:
    """Every member's /metrics read every SCRAPE_INTERVAL_S, as Prometheus would (more
    often than its default 15 s), from a thread, while the block runs."""
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(SCRAPE_INTERVAL_S):
            for m in cluster.members.values():
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(m.metrics_url + "/metrics", timeout=5) as r:
                        r.read()

    thread = threading.Thread(target=scrape, name="metrics-scraper", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def run_etcd_bench(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.concurrency.split(",") if x]
    rows: list[dict] = []
    n = args.members
    variants = (["plain"] + ["tls"] * args.tls + ["auth"] * args.auth
                + ["metrics"] * args.metrics)
    with Phases(on_terminal(args)) as phases:
        log(f"starting a {n}-member etcd on 127.0.0.1 ...")
        with EtcdCluster(n) as etcd:
            endpoint = etcd.wait_leader()
            name = next(m for m in etcd.names if endpoint.endswith(f":{etcd.client_ports[m]}"))
            meter = member_meter({m: p.pid for m, p in etcd.procs.items()}, name)
            rows += asyncio.run(etcd_ops(endpoint, "etcd", levels, args.seconds, args.claims,
                                         phases, meter))
        for variant in variants:
            rows += [{**r, "variant": variant}
                     for r in _coord_rows(args, variant, levels, phases)]
        log("starting the gRPC floor (a Python server answering at once) ...")
        with floor_server() as (address, pid):
            rows += asyncio.run(etcd_ops(address, "floor", levels, args.seconds, 0, phases,
                                         member_meter({"floor": pid}, "floor")))
    if args.json:
        print_json(args.run, rows)
        return 0
    print(f"coord vs etcd 3.4, {n} member(s) each on 127.0.0.1, one client process, "
          f"{args.seconds:g} s per put/get level, {args.claims} claims per level; CPU: "
          "each member's from /proc over the measurement, per op (followers: their mean)")
    print("  api floor: not coord but a Python gRPC server that answers each call at once "
          "(no Raft, no state; coord.bench.grpc_floor), same loop and driver: what any "
          "Python unary server pays per call here")
    print("  snapshots: coord's members' snapshots that ended during the row, how many and "
          "their seconds in all (each costs that member CPU: a row one lands in runs slower)")
    print(f"  ownall: one native Own request of {args.resources} resources, {OWN_ALL_TIMES} "
          "times: claims/s at the median request, p50/p99 the median and slowest request's "
          "ms (etcd has no one-request claim of many keys)")
    print(printed(table({"rows": rows}), indent="  "))
    return 0


def _coord_rows(args: argparse.Namespace, variant: str, levels: list[int],
                phases: Phases) -> list[dict]:
    """Every coord row on a fresh cluster: plaintext, over TLS, with auth on, or serving
    metrics that are scraped all along."""
    n = args.members
    log(f"starting a {n}-member coord on 127.0.0.1 ({variant}) ...")
    metrics = variant == "metrics"
    with LocalCluster(n, tls=variant == "tls", metrics=metrics) as cluster, \
            (scraped(cluster) if metrics else contextlib.nullcontext()):
        tls = cluster.client_tls
        name = cluster.wait_for_leader(timeout=15)
        leader = cluster.members[name].listen
        token = ""
        if variant == "auth":
            bench_auth.enable_auth(leader)
            token = bench_auth.log_in(leader)
        pids = {m: member.proc.pid for m, member in cluster.members.items() if member.proc}
        logs = {m: member.log_path for m, member in cluster.members.items()}
        counters = {m: partial(_round_counts, cluster, m) for m in pids}
        meter = member_meter(pids, name, logs, counters)
        profile = (partial(Profiler, Path(args.profile) / variant, pids, name,
                           seconds=args.seconds) if args.profile else None)
        rows = asyncio.run(etcd_ops(leader, "coord", levels, args.seconds, args.claims,
                                    phases, meter, tls, token, profile))
        rows += asyncio.run(coord_native(leader, levels, args.seconds, phases, meter, tls,
                                         token, args.resources))
        rows += asyncio.run(coord_stream(leader, levels, args.seconds, args.claims,
                                         phases, meter, profile, tls, variant == "auth"))
    return rows


def cost_table(rows: list[dict], variants: list[str]) -> BenchTable:
    """One row per coord (op, api, clients): ops/s and p50 of each variant, and each
    variant's ops/s over plaintext's."""
    by = {(r["variant"], r["op"], r["api"], r["clients"]): r
          for r in rows if r["system"] == "coord"}
    others = variants[1:]
    headers = ["op", "api", "clients", "plain/s", "p50 ms"]
    for v in others:
        headers += [v + "/s", "p50 ms", v + "/plain"]
    lines = []
    for (variant, op, api, clients), r in by.items():
        if variant != "plain":
            continue
        line = [op, api, str(clients), f"{r['per_s']:,.0f}", f"{r['p50_ms']:.2f}"]
        for v in others:
            o = by.get((v, op, api, clients))
            line += ([f"{o['per_s']:,.0f}", f"{o['p50_ms']:.2f}",
                      f"{o['per_s'] / r['per_s']:.2f}"] if o else ["-"] * 3)
        lines.append(line)
    return BenchTable(headers, lines, title="coord plaintext beside " + " and ".join(
        VARIANTS.get(v, v) for v in others) + ", the same run:")


def _round_counts(cluster: LocalCluster, member: str) -> dict[str, int]:
    """A coord member's round counts so far, from its Status."""
    return dict(cluster.status(member).round_counts)
