"""`coord bench audit`: rows/s of the history pipeline on this machine — synth (the
real state machine making a history, written to Parquet), export (a real member's
history, live through History.Export and then offline from its data dir, with the
member's put latency while a live export runs), and the PySpark audit (per check) — at
the sizes given, and with `--sink-rows` the end-to-end audit of a fenced sink's log
(`coord.spark.synth` makes a history with Spark jobs in it and their sink's log of that
many rows, streamed in bounded memory; the audit checks the history and the log
together, as `coord audit --sink-log` does), each phase with its memory curve (driver
Python, JVMs, Python workers: peak and samples). Synth and the offline export also give
their rows per CPU-second beside the wall rate (synth's of this process and the process
that writes its Parquet, as `coord history synth` runs them): on a machine shared with
other work the wall rate measures the load as much as the code. Each phase's figures go
to stderr as a JSON line as soon as it ends (a long run keeps what it measured), the
table (or --json) to stdout at the end.
Heavy by design: `make bench-audit` runs it, the suite never does."""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from coord.bench import log
from coord.bench.memory_curve import MemoryCurve
from coord.bench.run_record import print_json
from coord.bench.tables import BenchTable


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (the process
    writing a synth's Parquet)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _synth(n: int, out: Path) -> dict[str, Any]:
    """Synthesize `n` commands into `out`, or reuse the history a kept `out` holds
    (`--history-dir`: a 10M history takes a quarter of an hour to make)."""
    from coord.history.sink import HistorySink, read_manifest
    from coord.history.synth import synthesize

    kept = read_manifest(out) if out.is_dir() else None
    if kept and kept["runs"]:  # committed: synth-N was made whole for this N
        return {"commands": n, "rows": kept["rows"], "reused": str(out)}
    shutil.rmtree(out, ignore_errors=True)
    t, cpu = time.monotonic(), _cpu_seconds()
    with MemoryCurve() as memory:
        w = HistorySink(out, parquet_in_child=True).write(synthesize(n, seed=1))
    s, cpu_s = time.monotonic() - t, _cpu_seconds() - cpu
    return {"commands": n, "rows": w.rows, "seconds": round(s, 2),
            "entries_per_s": round(n / s), "rows_per_s": round(w.rows / s),
            "cpu_seconds": round(cpu_s, 2), "rows_per_cpu_s": round(w.rows / cpu_s),
            "memory": memory.figures()}


def _sink_synth(n: int, out: Path) -> dict[str, Any]:
    """Synthesize a history with Spark jobs in it into `out/history` and their sink's
    log of `n` rows into `out/sink`, or reuse a kept `out` that holds both."""
    from coord.history.sink import HistorySink, read_manifest
    from coord.spark.sink_log_files import LOG_FILE
    from coord.spark.synth import SinkLogSynth

    kept = read_manifest(out / "history") if out.is_dir() else None
    if kept and kept["runs"] and (out / "sink" / LOG_FILE).exists():
        return {"sink_rows": n, "rows": kept["rows"], "entries": kept["last_index"],
                "reused": str(out)}
    shutil.rmtree(out, ignore_errors=True)
    made = SinkLogSynth(out / "sink", n, seed=1)
    t, cpu = time.monotonic(), _cpu_seconds()
    with MemoryCurve() as memory:
        w = HistorySink(out / "history", parquet_in_child=True).write(made.rows())
    s, cpu_s = time.monotonic() - t, _cpu_seconds() - cpu
    sink_rows = made.log_rows
    return {**made.figures(), "rows": w.rows, "entries": w.last_index,
            "seconds": round(s, 2), "sink_rows_per_s": round(sink_rows / s),
            "sink_rows_per_cpu_s": round(sink_rows / cpu_s), "cpu_seconds": round(cpu_s, 2),
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
        t, cpu = time.monotonic(), time.process_time()
        w = HistorySink(root / "exported").write(datadir.read_rows(data_dir))
        s, cpu_s = time.monotonic() - t, time.process_time() - cpu
    return {"entries": w.last_index, "rows": w.rows, "offline_seconds": round(s, 2),
            "offline_rows_per_s": round(w.rows / s), "offline_cpu_seconds": round(cpu_s, 2),
            "offline_rows_per_cpu_s": round(w.rows / cpu_s), "live_seconds": round(live_s, 2),
            "live_rows_per_s": round(live.rows / live_s),
            "live_vs_offline": round((live.rows / live_s) / (w.rows / s), 2),
            "put_ms_idle": idle, "put_ms_during_live_export": during}


def _audit(history: Path, master: str, sink_log: Path | None = None) -> dict[str, Any]:
    """Every check of `history` (and of `sink_log` joined with it, if given)."""
    from coord.audit.job import run_audit
    from coord.audit.spark import session

    with MemoryCurve() as memory:
        t = time.monotonic()
        spark = session(master, "coord-bench-audit", progress=False)
        started = time.monotonic() - t
        try:
            r = run_audit(spark, history, with_stats=False, sink_log=sink_log,
                          on_step=lambda step: log(f"audit, {master}, at "
                                                   f"{time.monotonic() - t:.0f} s: {step}"))
        finally:
            spark.stop()
    s = r.summary
    figures = {"master": master, "session_start_s": round(started, 1),
               "rows": s["overview"]["rows"], "seconds": round(s["seconds"], 1),
               "rows_per_s": round(s["rows_per_second"]), "load_s": round(s["load_seconds"], 1),
               "checks_s": {k: round(v["seconds"], 1) for k, v in s["checks"].items()},
               "violations": s["violations"], "memory": memory.figures()}
    if sink_log is not None:
        rows, sink_s = s["sink_log_rows"], s["sink_seconds"]
        figures.update(sink_rows=rows, sink_seconds=round(sink_s, 1),
                       sink_rows_per_s=round(rows / s["seconds"]),
                       sink_check_rows_per_s=round(rows / sink_s), sink_tokens=s["sink_tokens"])
    return figures


def masters(text: str) -> list[str]:
    """`--masters`, split on the commas outside brackets: `local-cluster[2,1,1024]` is
    one master."""
    return [m for m in re.split(r",(?![^\[]*\])", text) if m]


def _peak(memory: dict[str, Any] | None) -> str:
    """A phase's memory peak as one cell: each group that held any, in MiB."""
    peak = (memory or {}).get("peak_mib", {})
    return ", ".join(f"{group} {peak[group]:,.0f}" for group in ("driver_py", "jvm",
                                                                 "py_workers")
                     if peak.get(group))


def _rate(rows_per_s: int | None, per_cpu_s: int | None) -> str:
    """A rows/s cell: the wall rate, and the rate per CPU-second when measured."""
    if rows_per_s is None:
        return ""
    return f"{rows_per_s:,}" + (f" ({per_cpu_s:,}/cpu-s)" if per_cpu_s else "")


def _top_checks(checks: dict[str, float], top: int = 3) -> str:
    slowest = sorted(checks.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name.split('.')[-1]} {s:.1f}" for name, s in slowest)


def table(figures: dict) -> BenchTable:
    """The table `coord bench audit` prints, from its figures (as --json gives them): a
    row per phase (the export's live and offline reads, each size's synth, each size's
    audit per master, the sink log's synth and its audit per master), with the export's
    put latency and what the sink log holds below. A sink log's rows/s are its own rows
    (the end-to-end audit's: sink rows per second of the whole audit)."""
    rows, notes = [], []
    for key, f in figures.items():
        if key == "export":
            for how in ("live", "offline"):
                rows.append([f"export ({how})", f"{f['rows']:,}", f"{f[how + '_seconds']:.2f}",
                             _rate(f[how + "_rows_per_s"], f.get(how + "_rows_per_cpu_s")),
                             "", ""])
            idle, during = f["put_ms_idle"], f["put_ms_during_live_export"]
            notes.append(f"export: live/offline rows/s {f['live_vs_offline']:.2f}; put p50/p99 "
                         f"{idle['p50']}/{idle['p99']} ms idle, {during['p50']}/"
                         f"{during['p99']} ms during a live export")
        elif key.startswith("synth_"):
            rows.append([f"synth {f['commands']:,} commands", f"{f['rows']:,}",
                         "reused" if "reused" in f else f"{f['seconds']:.2f}",
                         _rate(f.get("rows_per_s"), f.get("rows_per_cpu_s")), "",
                         _peak(f.get("memory"))])
        elif key.startswith("sink_synth_"):
            rows.append([f"synth sink log {f['sink_rows']:,} rows", f"{f['sink_rows']:,}",
                         "reused" if "reused" in f else f"{f['seconds']:.2f}",
                         _rate(f.get("sink_rows_per_s"), f.get("sink_rows_per_cpu_s")), "",
                         _peak(f.get("memory"))])
            if "reused" not in f:
                notes.append(f"sink log {f['sink_rows']:,}: a history of {f['entries']:,} "
                             f"entries ({f['rows']:,} rows); {f['published']:,} runs "
                             f"published, {f['attempts']:,} attempts, {f['retries']:,} "
                             f"retried, {f['speculative_losers']:,} speculative losers, "
                             f"{f['restarts']:,} restarted drivers, {f['refusals']:,} "
                             f"writes refused")
        elif key.startswith("sink_audit_"):
            rows.append([f"audit with sink log {f['sink_rows']:,}, {f['master']}",
                         f"{f['sink_rows']:,}",
                         f"{f['seconds']:.1f} (+{f['session_start_s']:.1f} start)",
                         f"{f['sink_rows_per_s']:,}", _top_checks(f["checks_s"]),
                         _peak(f.get("memory"))])
            notes.append(f"audit with sink log {f['sink_rows']:,}, {f['master']}: the sink "
                         f"checks took {f['sink_seconds']:.1f} s of {f['seconds']:.1f} s "
                         f"({f['sink_check_rows_per_s']:,} sink rows/s), the history "
                         f"{f['rows']:,} rows; {f['violations']} violations")
        elif key.startswith("audit_"):
            commands = int(key.split("_")[1])
            rows.append([f"audit {commands:,}, {f['master']}", f"{f['rows']:,}",
                         f"{f['seconds']:.1f} (+{f['session_start_s']:.1f} start)",
                         f"{f['rows_per_s']:,}", _top_checks(f["checks_s"]),
                         _peak(f.get("memory"))])
            if f["violations"]:
                notes.append(f"audit {commands:,}, {f['master']}: {f['violations']} violations")
    return BenchTable(["phase", "rows", "seconds", "rows/s", "slowest checks (s)",
                       "peak MiB"], rows, notes)


def run_audit_bench(args: argparse.Namespace) -> int:
    sizes = [n for n in (int(x) for x in str(args.commands).split(",") if x) if n]
    root = Path(tempfile.mkdtemp(prefix="coord-bench-audit-"))
    kept = Path(args.history_dir) if args.history_dir else None
    results: dict[str, Any] = {}
    try:
        if args.export_entries:
            results["export"] = _export(args.export_entries, root)
            log(json.dumps({"export": results["export"]}))
        for n in sizes:
            out = (kept or root) / f"synth-{n}"
            results[f"synth_{n}"] = _synth(n, out)
            log(json.dumps({f"synth_{n}": results[f"synth_{n}"]}))
            for master in masters(args.masters):
                key = f"audit_{n}_{master}"
                results[key] = _audit(out, master)
                log(json.dumps({key: results[key]}))
            if kept is None:
                shutil.rmtree(out, ignore_errors=True)
        if args.sink_rows:
            n, out = args.sink_rows, (kept or root) / f"sink-{args.sink_rows}"
            results[f"sink_synth_{n}"] = _sink_synth(n, out)
            log(json.dumps({f"sink_synth_{n}": results[f"sink_synth_{n}"]}))
            for master in masters(args.masters):
                key = f"sink_audit_{n}_{master}"
                results[key] = _audit(out / "history", master, out / "sink")
                log(json.dumps({key: results[key]}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print_json(args.run, results)
    else:
        print("\n".join(table(results).text()))
    return 0
