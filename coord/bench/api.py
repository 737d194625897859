"""`coord bench own|pid|kv`: client-API throughput and latency on a fresh 3-member
loopback cluster, driven through gRPC from one asyncio client process. Prints figures;
asserts nothing. The client shares the machine's 2 cores with the 3 members, so the
figures are end-to-end for this box, client cost included."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import grpc

from coord.bench import log
from coord.bench.member_cpu import Meter, measured
from coord.bench.run_record import print_json
from coord.bench.stats import latency_ms
from coord.bench.tables import BenchTable, from_dicts
from coord.client.calls import claim_columns
from coord.progress_bars import Phases, Step, on_terminal
from coord.testing import LocalCluster
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as rpc


async def metered(load: Callable[[], Awaitable[object]], clients: int,
                  latencies: list[float], meter: Meter | None = None,
                  counts: Callable[[], dict] = dict) -> dict:
    """The row every load reports: `load()` run once and timed, its workers filling
    `latencies`; what the load counted besides (`counts()`), and with a `meter` the
    members' CPU µs per op (`cpu_us_per_op`), read around the load."""
    before = meter() if meter else {}
    t0 = time.perf_counter()
    await load()
    elapsed = time.perf_counter() - t0
    row = {"clients": clients, "ops": len(latencies), **counts(),
           "per_s": len(latencies) / elapsed, **latency_ms(latencies)}
    if meter:
        row.update(measured(before, meter(), len(latencies)))
    return row


async def closed_loop(
    op: Callable[[int, int], Awaitable[object]], clients: int, seconds: float,
    meter: Meter | None = None,
) -> dict:
    """`clients` workers each run `op(worker, i)` back to back for `seconds`."""
    latencies: list[float] = []

    async def worker(w: int, deadline: float) -> None:
        i = 0
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            await op(w, i)
            latencies.append(time.perf_counter() - t0)
            i += 1

    async def load() -> None:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(worker(w, deadline) for w in range(clients)))

    return await metered(load, clients, latencies, meter)


async def timed_level(phases: Phases, what: str,
                      call: Callable[[int, int], Awaitable[object]], clients: int,
                      seconds: float, meter: Meter | None = None, **fields: str) -> dict:
    """One level of a closed loop of `call`, under a bar and logged as `what`: `fields`,
    then its figures."""
    log(f"{what} ...")
    async with phases.timed(what, seconds):
        row = {**fields, **await closed_loop(call, clients, seconds, meter)}
    log(f"  {row['per_s']:.0f}/s")
    return row


async def bench_kv(channel: grpc.aio.Channel, levels: list[int], seconds: float,
                   phases: Phases, meter: Meter | None = None) -> list[dict]:
    kv = rpc.KVStub(channel)
    rows = []
    for n in levels:

        async def put(w: int, i: int) -> None:
            await kv.Put(pb.PutRequest(key=f"bench/{w}/{i % 100}".encode(), value=b"x" * 16))

        async def get(w: int, i: int) -> None:
            await kv.Range(pb.RangeRequest(key=f"bench/{w}/{i % 100}".encode()))

        rows.append(await timed_level(phases, f"kv put: {n} clients", put, n, seconds, meter,
                                      op="put"))
        rows.append(await timed_level(phases, f"kv linearizable get: {n} clients", get, n,
                                      seconds, meter, op="get"))
    return rows


async def bench_pid(channel: grpc.aio.Channel, levels: list[int], seconds: float,
                    phases: Phases) -> list[dict]:
    producers = rpc.ProducersStub(channel)
    rows = []
    for n in levels:

        async def block(w: int, i: int) -> None:
            await producers.AllocatePidBlock(
                pb.AllocatePidBlockRequest(requester=f"b{w}", size=1000, request_id=f"{w}-{i}")
            )

        rows.append(await timed_level(phases, f"pid block: {n} clients", block, n, seconds,
                                      op="pid-block"))
    return rows


BATCHED_TIMES = 5
"""Batched owns timed per way of sending the claims; their median is the row's."""


async def own_in_one_request(channel: grpc.aio.Channel, resources: int,
                             group: str = "batched", session: str = "bench-batched",
                             columns: bool = True) -> float:
    """Seconds one Own request takes to claim `resources` resources of `group` (fresh,
    for a session of its own named `session`): the pipeline's start, every partition
    at once. The claims go as the client library sends them (`claim_columns`), or with
    `columns` False as one `Claim` message each, as a client building its own requests
    from the proto might."""
    sessions, own = rpc.SessionsStub(channel), rpc.OwnershipStub(channel)
    s = await sessions.OpenSession(pb.OpenSessionRequest(name=session, ttl_ms=60_000))
    pairs = [(f"p{i}", 0) for i in range(resources)]
    log(f"own: {resources} resources in one request ...")
    t0 = time.perf_counter()
    if columns:
        req = pb.OwnRequest(session_id=s.session_id, group=group,
                            claim_columns=claim_columns(pairs))
    else:
        req = pb.OwnRequest(session_id=s.session_id, group=group,
                            claims=[pb.Claim(resource=r, generation=g) for r, g in pairs])
    await own.Own(req)  # a refused own is an error status, raised here
    dt = time.perf_counter() - t0
    log(f"  {resources / dt:.0f} claims/s ({dt * 1000:.0f} ms)")
    return dt


async def bench_own(channel: grpc.aio.Channel, resources: int, levels: list[int],
                    phases: Phases) -> list[dict]:
    sessions, own = rpc.SessionsStub(channel), rpc.OwnershipStub(channel)
    rows = []
    for op, columns in (("own-batched", True), ("own-batched-rows", False)):
        dt = statistics.median([
            await own_in_one_request(channel, resources, group=f"{op}-{i}",
                                     session=f"bench-{op}-{i}", columns=columns)
            for i in range(BATCHED_TIMES)])
        rows.append({"op": op, "resources": resources, "seconds": dt,
                     "claims_per_s": resources / dt})
    for n in levels:
        s = await sessions.OpenSession(pb.OpenSessionRequest(name=f"bench-{n}", ttl_ms=60_000))
        group = f"single-{n}"
        log(f"own: {resources} resources one per request, {n} clients ...")
        latencies: list[float] = []
        queue = list(range(resources))
        t0 = time.perf_counter()
        with phases.phase(f"own one by one, {n} clients", resources, "claims") as step:
            await asyncio.gather(*(_claim_one_by_one(own, s.session_id, group, queue,
                                                     latencies, step) for _ in range(n)))
        dt = time.perf_counter() - t0
        rows.append({"op": "own-single", "resources": resources, "clients": n, "seconds": dt,
                     "claims_per_s": resources / dt, **latency_ms(latencies)})
        log(f"  {resources / dt:.0f} claims/s")
    return rows


async def _claim_one_by_one(
    own: rpc.OwnershipStub, session: int, group: str, queue: list[int], latencies: list[float],
    step: Step,
) -> None:
    while queue:
        i = queue.pop()
        t = time.perf_counter()
        await own.Own(
            pb.OwnRequest(session_id=session, group=group, claims=[pb.Claim(resource=f"p{i}")])
        )
        latencies.append(time.perf_counter() - t)
        step()


def run_api_bench(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.concurrency.split(",") if x]

    async def main(endpoint: str) -> list[dict]:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            if args.target == "kv":
                return await bench_kv(channel, levels, args.seconds, phases)
            if args.target == "pid":
                return await bench_pid(channel, levels, args.seconds, phases)
            return await bench_own(channel, args.resources, [x for x in levels if x > 1] or [16],
                                   phases)

    log("starting a 3-member cluster on 127.0.0.1 ...")
    with LocalCluster(3) as cluster, Phases(on_terminal(args)) as phases:
        leader = cluster.wait_for_leader(timeout=15)
        rows = asyncio.run(main(cluster.members[leader].listen))
    if args.json:
        print_json(args.run, rows)
    else:
        print(f"coord bench {args.target} (3 members on 127.0.0.1, client talks to the leader)")
        for line in table({"rows": rows}).text():
            print("  " + line)
    return 0


def table(figures: dict) -> BenchTable:
    """The table `coord bench own|pid|kv` prints, from its figures (as --json gives
    them): a row per load, a column per figure."""
    return from_dicts(figures["rows"])
