"""`coord bench scale`: how coord's footprint grows, beside etcd 3.4 driven the same way.

Each phase runs on a fresh cluster per system (coord, then etcd; never together, so each
has both cores), through the same etcd-v3-API asyncio driver talking to the leader:

  soak  puts on one hot key for --seconds, with both systems under the same
        --auto-compaction-mode/--auto-compaction-retention; every --sample-s it prints
        each member's RSS and data-dir bytes. Flat memory means bounded history.
  keys  grows the key space to --keys distinct keys (100-byte values, 100 puts per txn
        so a million keys load in minutes on both systems); at every decade
        it prints RSS per member, RSS bytes per key, disk, and put/get p50/p99 from
        --probe-ops ops at that size.
  restart  the same keys, restart and catch-up time per decade (scale_restart.py).
  sessions  CPU with --sessions sessions (etcd: leases) kept alive (scale_sessions.py).
  owners  grows to --owners owned resources (coord only; scale_owners.py).
  pids  grows to --pids live pid leases (coord only; scale_pids.py).

Figures only, nothing asserted; the box is shared, so print `uptime` beside them."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

import grpc

from coord.bench.footprint import mib, per_member
from coord.bench.run_record import print_json
from coord.bench.scale_common import (
    VALUE,
    Running,
    beside_etcd,
    decades,
    key,
    load,
    log,
    probe,
    retrying,
    running,
)
from coord.bench.scale_owners import GROW_BATCH, owners, owners_table
from coord.bench.scale_pids import IN_FLIGHT, pids, pids_table
from coord.bench.scale_restart import restart, restart_table
from coord.bench.scale_sessions import SESSION_STREAMS, sessions, sessions_table
from coord.bench.tables import BenchTable, printed
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.progress_bars import Phases, on_terminal

PHASES = ("soak", "keys", "restart", "sessions", "owners", "pids")


async def soak(run: Running, seconds: float, sample_s: float, clients: int,
               phases: Phases) -> list[dict]:
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
                    log(f"  {run.system}: put failed: {e.code().name} {e.details()}")
                    await asyncio.sleep(0.1)

        tasks = [asyncio.ensure_future(writer()) for _ in range(clients)]
        try:
            async with phases.timed(f"{run.system} soak", seconds):
                await _samples(run, t0, seconds, sample_s, rows, lambda: (puts, errors))
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return rows


async def _samples(run: Running, t0: float, seconds: float, sample_s: float,
                   rows: list[dict], counts: Callable[[], tuple[int, int]]) -> None:
    """A footprint row every `sample_s` until `seconds` since `t0`."""
    while time.monotonic() - t0 < seconds:
        await asyncio.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - t0))))
        puts, errors = counts()
        row = {"system": run.system, "t_s": round(time.monotonic() - t0, 1),
               "puts": puts, "errors": errors, **run.footprint()}
        rows.append(row)
        log(f"  {run.system} t={row['t_s']:7.1f}s puts={puts:9d} errors={errors} "
             f"rss MiB {' '.join(mib(v) for v in row['rss'].values())} "
             f"disk MiB {' '.join(mib(v) for v in row['disk'].values())}")


async def grow(run: Running, total: int, clients: int, probe_ops: int,
               phases: Phases) -> list[dict]:
    rows: list[dict] = []
    base = run.footprint()
    written = 0
    errors = [0]
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)
        for target in decades(total):
            t0 = time.monotonic()
            with phases.phase(f"{run.system} keys to {target:,}", target - written,
                              "keys") as step:
                await load(kv, written, target, clients, errors, step)
            load_s = time.monotonic() - t0
            written = target
            fp = run.footprint()
            per = max(1, probe_ops // clients)

            async def put(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await retrying(lambda: kv.Put(epb.PutRequest(key=k, value=VALUE),
                                               timeout=10), errors)

            async def get(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await retrying(lambda: kv.Range(epb.RangeRequest(key=k), timeout=10), errors)

            puts = await probe(put, clients, per)
            gets = await probe(get, clients, per)
            grown = max(0, fp["rss_max"] - base["rss_max"])
            row = {"system": run.system, "keys": target, "load_per_s": (target - (rows[-1][
                "keys"] if rows else 0)) / load_s, **fp, "bytes_per_key": grown / target,
                "put_p50_ms": puts["p50_ms"], "put_p99_ms": puts["p99_ms"],
                "get_p50_ms": gets["p50_ms"], "get_p99_ms": gets["p99_ms"], "errors": errors[0],
                **(run.last_snapshot() or {"snapshot_s": None})}
            rows.append(row)
            log(f"  {run.system} {target:>9d} keys: rss max {mib(fp['rss_max'])} MiB "
                 f"({row['bytes_per_key']:.0f} B/key), disk max {mib(fp['disk_max'])} MiB, "
                 f"put p99 {puts['p99_ms']:.2f} ms, get p99 {gets['p99_ms']:.2f} ms")
    return rows


def soak_table(rows: list[dict]) -> BenchTable:
    """A row per sample; below, each system's largest member's RSS spread over the
    second half of the soak (flat memory: bounded history)."""
    notes = []
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        half = mine[len(mine) // 2:]
        if len(half) >= 2:
            lo, hi = min(r["rss_max"] for r in half), max(r["rss_max"] for r in half)
            notes.append(f"{system}: max-member RSS over the second half of the soak "
                         f"{mib(lo)}..{mib(hi)} MiB ({(hi - lo) / max(lo, 1) * 100:+.1f}%)")
    return BenchTable(["system", "t_s", "puts", "errors", "rss MiB (per member)",
                       "disk MiB (per member)"],
                      [[r["system"], f"{r['t_s']:.1f}", f"{r['puts']:,}", str(r["errors"]),
                        per_member(r["rss"]), per_member(r["disk"])] for r in rows], notes)


def keys_table(rows: list[dict]) -> BenchTable:
    """A row per system and decade of keys; below, coord/etcd at each decade both
    reached."""
    lines = []
    for r in rows:
        snap = r.get("snapshot_s")
        lines.append([r["system"], f"{r['keys']:,}", f"{r['load_per_s']:,.0f}",
                      mib(r["rss_max"]), f"{r['bytes_per_key']:,.0f}", mib(r["disk_max"]),
                      f"{r['put_p50_ms']:.2f}/{r['put_p99_ms']:.2f}",
                      f"{r['get_p50_ms']:.2f}/{r['get_p99_ms']:.2f}", str(r.get("errors", 0)),
                      "-" if snap is None else f"{snap:.2f}"])
    notes = [f"at {r['keys']:,} keys coord/etcd: RSS per key "
             f"{r['bytes_per_key'] / e['bytes_per_key']:.2f}x, put p99 "
             f"{r['put_p99_ms'] / max(e['put_p99_ms'], 1e-9):.2f}x"
             for r, e in beside_etcd(rows, "keys") if e["bytes_per_key"] > 0]
    return BenchTable(["system", "keys", "load/s", "rss MiB", "B/key", "disk MiB",
                       "put p50/p99 ms", "get p50/p99 ms", "errors", "snapshot s"], lines, notes)


TABLES: dict[str, tuple[str, Callable[[list[dict]], BenchTable]]] = {
    "soak": ("soak: puts on one key, each member's footprint every sample", soak_table),
    "keys": ("keys: a growing key space, at each decade", keys_table),
    "restart": ("restart: at each decade, kill -9 of every member to the first "
                "linearizable Range; a follower wiped and re-added to its Status at the "
                "leader's revision", restart_table),
    "sessions": ("sessions (etcd: leases) kept alive, at each decade", sessions_table),
    "owners": ("owners: coord grown to owned resources, at each decade", owners_table),
    "pids": ("pids: coord grown to live pid leases, at each decade", pids_table),
}
"""Each phase's short title (the printed one says the run's flags too) and its table."""


def table(figures: dict) -> list[BenchTable]:
    """The tables `coord bench scale` prints, from its figures (as --json gives them):
    one per phase that ran, in PHASES order."""
    return [replace(TABLES[phase][1](figures[phase]), title=TABLES[phase][0])
            for phase in PHASES if figures.get(phase)]


def run_scale_bench(args: argparse.Namespace) -> int:
    phases = [p for p in args.phases.split(",") if p]
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise SystemExit(f"coord bench scale: unknown phase(s) {bad}; choose from {PHASES}")
    systems = ["coord", "etcd"] if args.etcd else ["coord"]
    compaction = ["--auto-compaction-mode", args.auto_compaction_mode,
                  "--auto-compaction-retention", args.auto_compaction_retention]
    clients = max(int(x) for x in args.concurrency.split(",") if x)

    out: dict[str, list[dict]] = {p: [] for p in PHASES}
    for phase in phases:
        for system in systems:
            if phase in ("owners", "pids") and system != "coord":
                continue  # etcd has neither ownership nor pids
            log(f"{phase}: a {args.members}-member {system} on 127.0.0.1 "
                 f"({' '.join(compaction)}) ...")
            if phase == "restart":
                out["restart"] += restart(system, args.members, compaction, args.keys,
                                          clients)
                continue
            # No bar in the sessions phase: it measures this process's CPU too.
            shown = on_terminal(args) and phase in ("soak", "keys")
            with running(system, args.members, compaction) as run, \
                    Phases(shown) as bars:
                if phase == "owners":
                    out["owners"] += asyncio.run(owners(run, args.owners, args.probe_ops))
                elif phase == "pids":
                    out["pids"] += asyncio.run(pids(run, args.pids, args.probe_ops))
                elif phase == "sessions":
                    out["sessions"] += asyncio.run(sessions(
                        run, args.sessions, args.session_ttl, args.sample_s,
                        spread=args.keepalives_to == "spread"))
                elif phase == "soak":
                    out["soak"] += asyncio.run(soak(run, args.seconds, args.sample_s, clients,
                                                    bars))
                else:
                    out["keys"] += asyncio.run(grow(run, args.keys, clients, args.probe_ops,
                                                    bars))
    if args.json:
        print_json(args.run, out)
        return 0
    print(f"coord bench scale: {args.members} member(s) per cluster on 127.0.0.1, "
          f"{clients} clients, {' '.join(compaction)}")
    titles = {
        "soak": lambda: f"soak: puts of {len(VALUE)} B on one key for {args.seconds:g} s",
        "keys": lambda: (f"keys: {args.keys} distinct keys of {len(VALUE)} B values, "
                         f"{args.probe_ops} probe ops per decade"),
        "restart": lambda: (f"restart: at each decade up to {args.keys} keys, kill -9 of every "
                            "member to the first linearizable Range; a follower wiped and "
                            "re-added to its Status at the leader's revision"),
        "sessions": lambda: (
            f"sessions: up to {args.sessions} sessions (etcd: leases) of TTL "
            f"{args.session_ttl:g} s kept alive every TTL/3 over {SESSION_STREAMS} streams "
            f"{'spread over every member' if args.keepalives_to == 'spread' else 'to the leader'}"
            f" by one driver process on the same box; CPU % of one core over "
            f"{args.sample_s:g} s at each decade"),
        "owners": lambda: (f"owners: coord grown to {args.owners} owned resources (claimed "
                           f"{GROW_BATCH:,} per own); one claim's latency from "
                           f"{args.probe_ops} claims"),
        "pids": lambda: (f"pids: coord grown to {args.pids} live pid leases ({IN_FLIGHT:,} at a "
                         f"time on one pipelined stream); one lease's latency from "
                         f"{args.probe_ops} leases"),
    }
    for phase in PHASES:
        if out[phase]:
            print(titles[phase]())
            print(printed(TABLES[phase][1](out[phase]), indent="  "))
    return 0
