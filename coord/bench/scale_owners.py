"""`coord bench scale --phases owners`: a 3-member cluster grown to N owned resources.

What a user with a million partitions (Kafka's single reader/writer proposal) pays: at each
decade, the members' RSS and bytes per owned resource, disk, the claim rate while
growing (batches of GROW_BATCH claims, as a rebalance claims them), the latency of one
claim on a fresh resource (p50/p99), and the time of one batched own of BATCHED claims
(here against a big table). coord only: etcd has no ownership (its
recipe is a txn per claim on keys, which the keys phase covers).

Sessions hold at most PER_SESSION resources each and are opened with the maximum TTL
(1 h): none needs a keepalive within a run, which stays under OWNERS_TIMEOUT_S.
"""

from __future__ import annotations

import time

import grpc

from coord.bench.footprint import mib, per_member
from coord.bench.scale_common import Running, decades, log, machine_state, probe, retrying
from coord.bench.tables import BenchTable
from coord.sm.limits import MAX_TTL_MS
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as cpb

GROUP = "bench-owners"
GROW_BATCH = 10_000
PER_SESSION = 250_000
BATCHED = 10_000
PROBE_CLIENTS = 16
OWNERS_TIMEOUT_S = 3000.0  # under the sessions' 1 h TTL


def _claims(names: list[str]) -> list[pb.Claim]:
    return [pb.Claim(resource=n) for n in names]


async def owners(run: Running, total: int, probe_ops: int) -> list[dict]:
    """Grow to `total` owned resources by decade; a row of figures at each."""
    if run.system != "coord":
        return []
    rows: list[dict] = []
    errors = [0]
    base = run.footprint()
    start = time.monotonic()
    async with grpc.aio.insecure_channel(run.leader) as ch:
        sessions, own = cpb.SessionsStub(ch), cpb.OwnershipStub(ch)
        held: list[int] = []  # sessions, each owning up to PER_SESSION

        async def session_for(i: int) -> int:
            while len(held) <= i // PER_SESSION:
                req = pb.OpenSessionRequest(name=f"owners-{len(held)}", ttl_ms=MAX_TTL_MS)
                opened = await retrying(lambda req=req: sessions.OpenSession(req, timeout=30),
                                         errors)
                held.append(opened.session_id)
            return held[i // PER_SESSION]

        owned = 0
        for target in decades(total):
            t0 = time.monotonic()
            while owned < target:
                if time.monotonic() - start > OWNERS_TIMEOUT_S:
                    raise RuntimeError(f"owners phase over {OWNERS_TIMEOUT_S:g}s at {owned}")
                n = min(GROW_BATCH, target - owned, PER_SESSION - owned % PER_SESSION)
                req = pb.OwnRequest(session_id=await session_for(owned), group=GROUP,
                                    claims=_claims([f"r{i:08d}" for i in range(owned,
                                                                               owned + n)]),
                                    request_id=f"bench-owners-grow-{owned}")
                await retrying(lambda req=req: own.Own(req, timeout=60), errors)
                owned += n
            grow_s = time.monotonic() - t0
            fp = run.footprint()
            probe_session = await session_for(0)
            per = max(1, probe_ops // PROBE_CLIENTS)

            async def claim(w: int, i: int, target: int = target,
                            probe_session: int = probe_session) -> None:
                req = pb.OwnRequest(session_id=probe_session, group=GROUP,
                                    claims=_claims([f"probe-{target}-{w}-{i}"]))
                await retrying(lambda: own.Own(req, timeout=10), errors)

            one = await probe(claim, PROBE_CLIENTS, per)
            batch = [f"batched-{target}-{i}" for i in range(BATCHED)]
            t1 = time.perf_counter()
            await own.Own(pb.OwnRequest(session_id=probe_session, group=GROUP,
                                        claims=_claims(batch)), timeout=60)
            batched_s = time.perf_counter() - t1
            probes = [f"probe-{target}-{w}-{i}" for w in range(PROBE_CLIENTS)
                      for i in range(per)]
            await own.Release(pb.ReleaseRequest(session_id=probe_session, group=GROUP,
                                                resources=batch + probes), timeout=60)
            held_now = (await machine_state(run.leader))["owned_resources"]
            grown = max(0, fp["rss_max"] - base["rss_max"])
            row = {"system": run.system, "owned": target,
                   "own_per_s": (target - (rows[-1]["owned"] if rows else 0)) / grow_s,
                   **fp, "bytes_per_owned": grown / target,
                   "claim_p50_ms": one["p50_ms"], "claim_p99_ms": one["p99_ms"],
                   "batched_own_s": batched_s, "sessions": len(held),
                   "owned_on_leader": held_now, "errors": errors[0]}
            rows.append(row)
            log(f"  coord {target:>9d} owned: rss max {mib(fp['rss_max'])} MiB "
                 f"({row['bytes_per_owned']:.0f} B/owned), disk max {mib(fp['disk_max'])} "
                 f"MiB, one claim p50/p99 {one['p50_ms']:.2f}/{one['p99_ms']:.2f} ms, own of "
                 f"{BATCHED} in {batched_s * 1000:.0f} ms")
    return rows


def owners_table(rows: list[dict]) -> BenchTable:
    """A row per decade of owned resources; below, a leader whose count differs from
    what was claimed, and calls that failed and were retried."""
    notes = []
    for r in rows:
        if r["owned_on_leader"] != r["owned"]:
            notes.append(f"at {r['owned']:,} owned: the leader holds {r['owned_on_leader']:,}")
        if r["errors"]:
            notes.append(f"up to {r['owned']:,} owned: {r['errors']} calls failed and were "
                         "retried")
    return BenchTable(
        ["owned", "own/s", "rss MiB (per member)", "B/owned", "disk MiB", "claim p50/p99 ms",
         f"own of {BATCHED:,} ms"],
        [[f"{r['owned']:,}", f"{r['own_per_s']:,.0f}", per_member(r["rss"]),
          f"{r['bytes_per_owned']:,.0f}", mib(r["disk_max"]),
          f"{r['claim_p50_ms']:.2f}/{r['claim_p99_ms']:.2f}",
          f"{r['batched_own_s'] * 1000:,.0f}"] for r in rows], notes)
