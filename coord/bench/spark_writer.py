"""`coord bench spark`: the fenced Spark writer against a plain write to the same sink.

Real Spark (local[2]) and a real 3-member coord cluster. Per run, the same DataFrame
(`--rows` rows: id, its decimal string) is written by a plain, unfenced `coord-fenced`
write (fence=off: each batch straight into the visible table, as any simple Python data
source would) and by the fenced writer, alternating, to fresh sinks; rows/s are the row
count over `save()`'s wall time, and the ratio is of the medians. Then the fence's own
cost per partition: the claim (session + own + InitProducer + owner read-back) and the
commit-time check (owner + CheckProducer), timed alone; and the same write with
`--many-partitions` partitions. The machine's load (`os.getloadavg`) is printed before
and after: on a shared machine it moves every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from coord.bench.stats import latency_ms, ratio, summarize

SINKS = ("sqlite", "parquet")


def _session() -> Any:
    from pyspark.sql import SparkSession

    from coord.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("coord-bench-spark")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _write(spark: Any, endpoints: list[str], rows: int, parts: int, sink: str, out: Path,
           fence: bool, job: str) -> float:
    """Rows per second of one save() into a fresh sink."""
    df = spark.range(0, rows, numPartitions=parts).selectExpr("id", "cast(id as string) s")
    w = (df.write.format("coord-fenced").mode("append").option("sink", sink)
         .option("endpoints", ",".join(endpoints)).option("job", job)
         .option("fence", "on" if fence else "off").option("version", "1"))
    w = (w.option("path", str(out / "out.db")).option("table", "out") if sink == "sqlite"
         else w.option("path", str(out / "dir")))
    start = time.perf_counter()
    w.save()
    return rows / (time.perf_counter() - start)


def _fence_cost(endpoints: list[str], partitions: int) -> dict[str, dict[str, float]]:
    from coord.client import Client
    from coord.spark.attempt import check_run, claim, start_run

    claims: list[float] = []
    checks: list[float] = []
    with Client(endpoints) as client:
        run = start_run(client, "bench-cost")
        for p in range(partitions):
            start = time.perf_counter()
            session, attempt = claim(client, "bench-cost", p, run=run)
            claims.append(time.perf_counter() - start)
            session.detach()
            start = time.perf_counter()
            check_run(client, "bench-cost", run)
            checks.append(time.perf_counter() - start)
            client.close_session(attempt.session_id)
    return {"claim": latency_ms(claims), "commit_check": latency_ms(checks)}


def run_spark_bench(args: argparse.Namespace) -> int:
    from coord.testing import cluster

    load_before = os.getloadavg()
    results: dict[str, Any] = {"rows": args.rows, "partitions": args.partitions,
                               "runs": args.runs, "load_before": load_before}
    spark = _session()
    try:
        with cluster(members=3) as c, tempfile.TemporaryDirectory() as tmp:
            _write(spark, c.endpoints, 10_000, 2, "sqlite", Path(tmp) / "warm", True, "warm")
            for sink in SINKS:
                rates: dict[str, list[float | None]] = {"plain": [], "fenced": []}
                for run in range(args.runs):
                    for kind in ("plain", "fenced"):
                        out = Path(tmp) / f"{sink}-{kind}-{run}"
                        rate = _write(spark, c.endpoints, args.rows, args.partitions, sink,
                                      out, kind == "fenced", f"bench-{sink}-{run}")
                        rates[kind].append(rate)
                        print(f"{sink} {kind} run {run}: {rate:,.0f} rows/s", flush=True)
                plain, fenced = summarize(rates["plain"]), summarize(rates["fenced"])
                results[sink] = {"plain": plain, "fenced": fenced,
                                 "fenced_over_plain": ratio(fenced["median"], plain["median"])}
            results["fence_cost"] = _fence_cost(c.endpoints, args.cost_partitions)
            many = {}
            for kind in ("plain", "fenced"):
                many[kind] = _write(spark, c.endpoints, args.rows, args.many_partitions,
                                    "sqlite", Path(tmp) / f"many-{kind}", kind == "fenced",
                                    "bench-many")
            results["many_partitions"] = {
                "partitions": args.many_partitions, "plain_rows_s": many["plain"],
                "fenced_rows_s": many["fenced"],
                "fenced_over_plain": ratio(many["fenced"], many["plain"])}
    finally:
        spark.stop()
    results["load_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"\nload average before {load_before[0]:.1f}, after {results['load_after'][0]:.1f}")
    for sink in SINKS:
        r = results[sink]
        print(f"{sink}: {args.rows:,} rows, {args.partitions} partitions, {args.runs} runs: "
              f"plain {r['plain']['median']:,.0f} rows/s, fenced {r['fenced']['median']:,.0f}"
              f" rows/s (medians); fenced/plain {r['fenced_over_plain']:.2f}")
    cost = results["fence_cost"]
    print(f"fence cost per partition ({args.cost_partitions} sequential claims): claim "
          f"p50 {cost['claim']['p50_ms']:.1f} ms p99 {cost['claim']['p99_ms']:.1f} ms; "
          f"commit check p50 {cost['commit_check']['p50_ms']:.1f} ms "
          f"p99 {cost['commit_check']['p99_ms']:.1f} ms")
    m = results["many_partitions"]
    print(f"sqlite, {m['partitions']} partitions: plain {m['plain_rows_s']:,.0f} rows/s, "
          f"fenced {m['fenced_rows_s']:,.0f} rows/s; fenced/plain {m['fenced_over_plain']:.2f}")
    return 0
