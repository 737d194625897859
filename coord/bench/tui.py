"""`coord bench tui` (`make bench-tui`): how the console copes with a big, busy cluster:
10,000 owners and 10,000 keys, the time from a claim and from a session's opening to its
row on screen, and the console's CPU while idle and while the cluster takes ~1,000
changes/s.

The cluster is one `coord serve` process; the changes come from another process; the
console runs headless (textual's pilot) in this one, so `time.process_time()` here is
the console's CPU (its feeds, model and drawing)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from coord.bench import log
from coord.bench.run_record import print_json
from coord.bench.tables import BenchTable
from coord.client import AsyncClient, Client
from coord.testing import LocalCluster
from coord.tui.app import CoordApp

N_OWNERS = 10_000
N_KEYS = 10_000
CLAIMS = 30
WINDOW_S = 5.0

WRITER = """
import sys, time
from coord.client import Client
rate, seconds = float(sys.argv[2]), float(sys.argv[3])
with Client(sys.argv[1].split(",")) as c:
    done, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        t = c.txn()
        for i in range(20):
            t.then_put(f"load/{(done + i) % 500}", str(done + i))
        t.commit()
        done += 20
        ahead = done / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    print(done / (time.monotonic() - start))
"""


def preload(endpoints: list[str]) -> None:
    with Client(endpoints) as c:
        for batch in range(N_OWNERS // 1000):
            s = c.open_session(f"bench-{batch}", ttl=600)
            c.own(s.session_id, f"group-{batch % 4}",
                  [f"r-{batch}-{i:04d}" for i in range(1000)])
        for start in range(0, N_KEYS, 100):
            t = c.txn()
            for i in range(start, start + 100):
                t.then_put(f"data/{i % 50}/{i:05d}", f"value-{i}")
            t.commit()


async def _to_row(pilot: Any, view: Any, act: Callable[[int], Awaitable[str]],
                  what: str, call: str) -> dict[str, float]:
    """CLAIMS times: `act(i)` (its call timed) and the wait until the row id it returns
    is in `view`, each bounded by 10 s: ms to the row (median, max) and of the call."""
    latencies, rpcs = [], []
    for i in range(CLAIMS):
        start = time.monotonic()
        row = await act(i)
        rpcs.append((time.monotonic() - start) * 1000)
        while row not in view._ids:
            if time.monotonic() - start > 10:
                raise RuntimeError(f"a {what}'s row did not appear in 10 s")
            await pilot.pause(0.005)
        latencies.append((time.monotonic() - start) * 1000)
    return {f"{what}_to_row_ms_median": statistics.median(latencies),
            f"{what}_to_row_ms_max": max(latencies),
            f"{call}_rpc_ms_median": statistics.median(rpcs)}  # of which: the call itself


async def measure(endpoints: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    async with AsyncClient(endpoints, read_only_ok=True) as console, \
            AsyncClient(endpoints) as client:
        app = CoordApp(client=console, start_view="owners")
        async with app.run_test(size=(160, 48)) as pilot:
            t0 = time.monotonic()
            while len(app.model.owners) < N_OWNERS or len(app.model.keys) < N_KEYS:
                if time.monotonic() - t0 > 120:
                    raise RuntimeError("the console did not load the cluster in 120 s")
                await pilot.pause(0.05)
            while len(app.views["owners"]._ids) < N_OWNERS:
                await pilot.pause(0.05)
            out["load_s"] = time.monotonic() - t0
            await pilot.pause(1.0)

            cpu0, wall0 = time.process_time(), time.monotonic()
            await pilot.pause(WINDOW_S)
            out["idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (
                time.monotonic() - wall0)

            s = await client.open_session("claims", ttl=60)

            async def claim(i: int) -> str:
                await client.own(s.session_id, "claims", [f"c-{i}"])
                return f"claims\x1fc-{i}"

            out.update(await _to_row(pilot, app.views["owners"], claim, "claim", "own"))

            app.show_view("sessions")  # sessions come by their own stream (WatchSessions)

            async def open_one(i: int) -> str:
                return str((await client.open_session(f"opened-{i}", ttl=60)).session_id)

            out.update(await _to_row(pilot, app.views["sessions"], open_one, "session",
                                     "open"))

            await pilot.press("colon")
            app.query_one("#prompt").value = "keys"
            await pilot.press("enter")
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, ",".join(endpoints), "1000", str(WINDOW_S)],
                stdout=subprocess.PIPE, text=True)
            cpu0, wall0 = time.process_time(), time.monotonic()
            while writer.poll() is None:
                await pilot.pause(0.1)
            out["busy_cpu_pct"] = 100 * (time.process_time() - cpu0) / (
                time.monotonic() - wall0)
            out["busy_changes_per_s"] = float(writer.stdout.read().strip() or 0)
    return out


FIGURES = (
    ("load_s", "s", "all owners on screen"),
    ("idle_cpu_pct", "% of a core", "the console's CPU, idle"),
    ("busy_cpu_pct", "% of a core", "the console's CPU, the cluster busy"),
    ("busy_changes_per_s", "changes/s", "the cluster's changes while busy"),
    ("claim_to_row_ms_median", "ms", "a claim to its row, median"),
    ("claim_to_row_ms_max", "ms", "a claim to its row, max"),
    ("own_rpc_ms_median", "ms", "of which the own call, median"),
    ("session_to_row_ms_median", "ms", "a session's opening to its row, median"),
    ("session_to_row_ms_max", "ms", "a session's opening to its row, max"),
    ("open_rpc_ms_median", "ms", "of which the open call, median"),
)
"""Each figure `measure` takes: its key, unit, and what it is."""


def table(figures: dict) -> BenchTable:
    """The table `coord bench tui` prints, from its figures (as --json gives them)."""
    return BenchTable([f"{N_OWNERS:,} owners and {N_KEYS:,} keys", "value", "unit"],
                      [[about, f"{figures[key]:,.1f}", unit] for key, unit, about in FIGURES
                       if key in figures])


def run_tui_bench(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as d:
        cluster = LocalCluster(1, data_dir=Path(d)).start()
        try:
            t = time.monotonic()
            preload(cluster.endpoints)
            log(f"preloaded {N_OWNERS} owners and {N_KEYS} keys in "
                f"{time.monotonic() - t:.1f}s")
            results = asyncio.run(measure(cluster.endpoints))
        finally:
            cluster.stop()
    if args.json:
        print_json(args.run, results)
    else:
        print("\n".join(table(results).text()))
    return 0
