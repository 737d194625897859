"""`coord bench scale --phases pids`: a 3-member cluster grown to N live pid leases.

What an idempotent-producer fleet pays (Kafka's pid leases): at each decade, the
members' RSS and bytes per live lease, disk, the lease rate while growing (IN_FLIGHT
leases at a time on the client library's pipelined stream, which the member proposes
together), one lease's p50/p99, and the leader's own count of live leases (checked equal
to what was leased). The cluster's ring is first set to hold them all (`coord pid
capacity`, a committed setting; 65,536 by default). coord only: etcd has no pids.

Leases live the default hour: none expires within a run, which stays under
PIDS_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import sys
import time

from coord.bench.footprint import mib, per_member
from coord.bench.scale_common import Running, decades, log, machine_state, probe
from coord.bench.tables import BenchTable
from coord.client.aio import AsyncClient

IN_FLIGHT = 3_200
PROBE_CLIENTS = 16
PIDS_TIMEOUT_S = 3000.0  # under the leases' one-hour lifetime
TOPICS = 1000  # leases spread over this many (topic, partition) names


async def _set_capacity(run: Running, capacity: int) -> None:
    """The operator's way: `coord pid capacity`, a process like any tool's."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coord", "pid", "capacity", str(capacity),
        "--endpoints", run.leader, "--timeout", "30",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"coord pid capacity {capacity}: {err.decode().strip()}")


async def pids(run: Running, total: int, probe_ops: int) -> list[dict]:
    """Grow to `total` live pid leases by decade; a row of figures at each."""
    if run.system != "coord":
        return []
    per = max(1, probe_ops // PROBE_CLIENTS)
    targets = decades(total)
    await _set_capacity(run, total + PROBE_CLIENTS * per * len(targets))
    rows: list[dict] = []
    base = run.footprint()
    start = time.monotonic()
    leased = 0
    # The leader first, the others after it: a lease moves on if leadership does.
    endpoints = [run.leader, *(e for e in run.endpoints.values() if e != run.leader)]
    async with AsyncClient(endpoints, timeout=30.0, randomize_endpoints=False) as client:
        for target in targets:
            t0 = time.monotonic()
            while leased < target:
                if time.monotonic() - start > PIDS_TIMEOUT_S:
                    raise RuntimeError(f"pids phase over {PIDS_TIMEOUT_S:g}s at {leased}")
                n = min(IN_FLIGHT, target - leased)
                first = leased
                await asyncio.gather(*(client.lease_pid(f"topic-{i % TOPICS}", i // TOPICS)
                                       for i in range(first, first + n)))
                leased += n
            grow_s = time.monotonic() - t0
            fp = run.footprint()

            async def lease(w: int, i: int) -> None:
                await client.lease_pid("probe", w)

            one = await probe(lease, PROBE_CLIENTS, per)
            leased += PROBE_CLIENTS * per
            on_leader = (await machine_state(run.leader))["pid_leases"]
            grown = max(0, fp["rss_max"] - base["rss_max"])
            row = {"system": run.system, "leases": target,
                   "lease_per_s": (target - (rows[-1]["leases"] if rows else 0)) / grow_s,
                   **fp, "bytes_per_lease": grown / target,
                   "lease_p50_ms": one["p50_ms"], "lease_p99_ms": one["p99_ms"],
                   "leases_on_leader": on_leader, "leased": leased}
            rows.append(row)
            log(f"  coord {target:>9d} pid leases: rss max {mib(fp['rss_max'])} MiB "
                f"({row['bytes_per_lease']:.0f} B/lease), disk max {mib(fp['disk_max'])} MiB, "
                f"{row['lease_per_s']:.0f} leases/s, one lease p50/p99 "
                f"{one['p50_ms']:.2f}/{one['p99_ms']:.2f} ms")
    return rows


def pids_table(rows: list[dict]) -> BenchTable:
    """A row per decade of live leases; below, a leader whose live count differs from
    the leases made."""
    return BenchTable(
        ["leases", "leases/s", "rss MiB (per member)", "B/lease", "disk MiB",
         "lease p50/p99 ms"],
        [[f"{r['leases']:,}", f"{r['lease_per_s']:,.0f}", per_member(r["rss"]),
          f"{r['bytes_per_lease']:,.0f}", mib(r["disk_max"]),
          f"{r['lease_p50_ms']:.2f}/{r['lease_p99_ms']:.2f}"] for r in rows],
        [f"at {r['leases']:,} leases: the leader holds {r['leases_on_leader']:,} live, "
         f"{r['leased']:,} were leased" for r in rows if r["leases_on_leader"] != r["leased"]])
