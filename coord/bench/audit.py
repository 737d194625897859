"""`coord bench audit`: rows/s of the history pipeline on this machine — synth (the
real state machine making a history, written to Parquet), export (a real member's
history, live through History.Export and then offline from its data dir, with the
member's put latency while a live export runs), and the PySpark audit (per check) — at
the sizes given, each phase with its memory curve (driver Python, JVMs, Python workers:
peak and samples) and the machine's load while it ran.
Heavy by design: `make bench-audit` runs it, the suite never does."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from coord.bench.memory_curve import MemoryCurve
from coord.bench.run_record import print_json


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _synth(n: int, out: Path) -> dict[str, Any]:
    """Synthesize `n` commands into `out`, or reuse the history a kept `out` holds
    (`--history-dir`: a 10M history takes a quarter of an hour to make)."""
    from coord.history.sink import HistorySink, read_manifest
    from coord.history.synth import synthesize

    kept = read_manifest(out) if out.is_dir() else None
    if kept and kept["runs"]:  # committed: synth-N was made whole for this N
        return {"commands": n, "rows": kept["rows"], "reused": str(out)}
    shutil.rmtree(out, ignore_errors=True)
    t = time.monotonic()
    with MemoryCurve() as memory:
        w = HistorySink(out).write(synthesize(n, seed=1))
    s = time.monotonic() - t
    return {"commands": n, "rows": w.rows, "seconds": round(s, 2),
            "entries_per_s": round(n / s), "rows_per_s": round(w.rows / s), "load": _load(),
            "memory": memory.figures()}


def _put_ms(client: Any, n: int = 300) -> dict[str, float]:
    """Latency of `n` puts, one after another: p50, p99, max (ms)."""
    times = []
    for i in range(n):
        t = time.perf_counter()
        client.put(b"bench/probe", b"%d" % i)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {"p50": round(times[n // 2], 1), "p99": round(times[int(n * 0.99)], 1),
            "max": round(times[-1], 1)}


def _export(entries: int, root: Path) -> dict[str, Any]:
    """A real member process writes `entries` (single puts and txns of 100 puts); its
    history is exported live (History.Export), then offline from its data dir once it
    stopped: rows/s of each and their ratio, and put latency with and without a live
    export running on the member."""
    import threading

    import coord.testing
    from coord.client import Client
    from coord.history import datadir
    from coord.history.sink import HistorySink

    with coord.testing.LocalCluster(members=1, data_dir=root / "member",
                                    extra_args=["--snapshot-every", "10000000"]) as c:
        with Client(c.endpoints) as client:
            for i in range(entries):
                if i % 10 == 0:
                    txn = client.txn()
                    for k in range(100):
                        txn.then_put(b"bench/t%d/%d" % (i, k), b"x" * 64)
                    txn.commit()
                else:
                    client.put(b"bench/%d" % (i % 1000), b"x" * 64)
            idle = _put_ms(client)
            t = time.monotonic()
            live = HistorySink(root / "live").write(
                r for page in client.export_history() for r in page.rows)
            live_s = time.monotonic() - t
            stop = threading.Event()

            def exporting() -> None:
                with Client(c.endpoints) as exporter:
                    while not stop.is_set():
                        for _ in exporter.export_history():
                            pass

            th = threading.Thread(target=exporting, daemon=True)
            th.start()
            time.sleep(0.3)
            during = _put_ms(client)
            stop.set()
            th.join(timeout=60)
        c.stop()
        data_dir = c.members["n1"].data_dir
        t = time.monotonic()
        w = HistorySink(root / "exported").write(datadir.read_rows(data_dir))
        s = time.monotonic() - t
    return {"entries": w.last_index, "rows": w.rows, "offline_seconds": round(s, 2),
            "offline_rows_per_s": round(w.rows / s), "live_seconds": round(live_s, 2),
            "live_rows_per_s": round(live.rows / live_s),
            "live_vs_offline": round((live.rows / live_s) / (w.rows / s), 2),
            "put_ms_idle": idle, "put_ms_during_live_export": during, "load": _load()}


def _audit(history: Path, master: str) -> dict[str, Any]:
    from coord.audit.job import run_audit
    from coord.audit.spark import session

    with MemoryCurve() as memory:
        t = time.monotonic()
        spark = session(master, "coord-bench-audit", progress=False)
        started = time.monotonic() - t
        try:
            r = run_audit(spark, history, with_stats=False)
        finally:
            spark.stop()
    s = r.summary
    return {"master": master, "session_start_s": round(started, 1),
            "rows": s["overview"]["rows"], "seconds": round(s["seconds"], 1),
            "rows_per_s": round(s["rows_per_second"]), "load_s": round(s["load_seconds"], 1),
            "checks_s": {k: round(v["seconds"], 1) for k, v in s["checks"].items()},
            "violations": s["violations"], "load": _load(), "memory": memory.figures()}


def masters(text: str) -> list[str]:
    """`--masters`, split on the commas outside brackets: `local-cluster[2,1,1024]` is
    one master."""
    return [m for m in re.split(r",(?![^\[]*\])", text) if m]


def run_audit_bench(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in str(args.commands).split(",")]
    root = Path(tempfile.mkdtemp(prefix="coord-bench-audit-"))
    kept = Path(args.history_dir) if args.history_dir else None
    results: dict[str, Any] = {}
    try:
        if args.export_entries:
            results["export"] = _export(args.export_entries, root)
            print(json.dumps({"export": results["export"]}), flush=True)
        for n in sizes:
            out = (kept or root) / f"synth-{n}"
            results[f"synth_{n}"] = _synth(n, out)
            print(json.dumps({f"synth_{n}": results[f"synth_{n}"]}), flush=True)
            for master in masters(args.masters):
                key = f"audit_{n}_{master}"
                results[key] = _audit(out, master)
                print(json.dumps({key: results[key]}), flush=True)
            if kept is None:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_json(args.run, results)
    return 0
