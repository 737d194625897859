"""`coord bench audit`: rows/s of the history pipeline on this machine — synth (the
real state machine making a history, written to Parquet), export (a real member's data
dir replayed and written), and the PySpark audit (per check) — at the sizes given.
Heavy by design: `make bench-audit` runs it, the suite never does."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _synth(n: int, out: Path) -> dict[str, Any]:
    from coord.history.sink import HistorySink
    from coord.history.synth import synthesize

    t = time.monotonic()
    w = HistorySink(out).write(synthesize(n, seed=1))
    s = time.monotonic() - t
    return {"commands": n, "rows": w.rows, "seconds": round(s, 2),
            "entries_per_s": round(n / s), "rows_per_s": round(w.rows / s), "load": _load()}


def _export(entries: int, root: Path) -> dict[str, Any]:
    import coord.testing
    from coord.client import Client
    from coord.history import datadir
    from coord.history.sink import HistorySink

    with coord.testing.LocalCluster(members=1, data_dir=root / "member",
                                    in_process=True) as c:
        with Client(c.endpoints) as client:
            for i in range(entries):
                client.put(b"bench/%d" % (i % 1000), b"x" * 64)
        c.stop()
        data_dir = c.members["n1"].data_dir
        t = time.monotonic()
        w = HistorySink(root / "exported").write(datadir.read_rows(data_dir))
        s = time.monotonic() - t
    return {"entries": w.last_index, "rows": w.rows, "seconds": round(s, 2),
            "rows_per_s": round(w.rows / s), "load": _load()}


def _audit(history: Path, master: str) -> dict[str, Any]:
    from coord.audit.job import run_audit
    from coord.audit.spark import session

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
            "violations": s["violations"], "load": _load()}


def run_audit_bench(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in str(args.commands).split(",")]
    root = Path(tempfile.mkdtemp(prefix="coord-bench-audit-"))
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count()}
    try:
        results["export"] = _export(args.export_entries, root)
        print(json.dumps({"export": results["export"]}), flush=True)
        for n in sizes:
            out = root / f"synth-{n}"
            results[f"synth_{n}"] = _synth(n, out)
            print(json.dumps({f"synth_{n}": results[f"synth_{n}"]}), flush=True)
            for master in args.masters.split(","):
                key = f"audit_{n}_{master}"
                results[key] = _audit(out, master)
                print(json.dumps({key: results[key]}), flush=True)
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=1))
    return 0
