"""`coord bench spark`: the fenced Spark writer against Spark's own JDBC writer and a
plain write, on the same databases.

Real Spark (local[2]), a real 3-member coord cluster and a real PostgreSQL server
(coord.testing.peer_postgres). Per run, the same DataFrame (`--rows` rows: id, its
decimal string) is written to fresh tables of each sink — SQLite, PostgreSQL, a Parquet
directory — by each writer, alternating: `plain` (coord-fenced with fence=off: each batch
straight into the visible table, as any simple Python data source would), `fenced`, and,
on the two databases, `jdbc` (Spark's own `df.write.jdbc` through Debian's JDBC drivers,
coord.testing.jdbc: what a Spark user writes to a database with) and `foreach`
(`df.foreachPartition(insert_rows)`, coord.bench.spark_foreach: what one writes without
a JDBC writer); on the Parquet directory, `spark` (Spark's own `df.write.parquet`,
whose file committer already publishes each task's files once). Rows/s are the row
count over the write's wall time; the ratios are of the medians; a database table's
duplicate rows are counted after each write (none is expected: no fault is injected
here, tests/spark has those). Then the fence's own
cost per partition: the claim (session + own + InitProducer + owner read-back) and the
commit-time check (the run slot's owner, read linearizably), timed alone, and the
requests a claim makes and the waits for them in a row (counted, not timed); and the
same SQLite write with `--many-partitions` partitions. Without PostgreSQL or the JDBC drivers (`make
database-servers` installs them) their rows are left out, saying so. The printed tables
are `table(figures)` of the --json figures, so the manual can render the same ones.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from coord.bench import log
from coord.bench.run_record import print_json
from coord.bench.stats import latency_ms, ratio, summarize
from coord.bench.tables import BenchTable, cell, printed

SINKS = ("sqlite", "postgres", "parquet")
JDBC_DRIVERS = {"sqlite": "org.sqlite.JDBC", "postgres": "org.postgresql.Driver"}


def _session() -> Any:
    from pyspark.sql import SparkSession

    from coord.audit.spark import local_only
    from coord.spark import register
    from coord.testing.jdbc import jars_conf

    builder = local_only(SparkSession.builder.master("local[2]").appName("coord-bench-spark")
                         .config("spark.ui.enabled", "false")
                         # the rows printed are the output
                         .config("spark.ui.showConsoleProgress", "false"))
    for key, value in jars_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _target(sink: str, out: Path, postgres: Any) -> dict[str, str]:
    """The options naming a fresh sink (and, for a database, its JDBC URL as `jdbc`)."""
    from coord.testing.jdbc import sqlite_jdbc_url

    if sink == "sqlite":
        path = str(out / "out.db")
        return {"sink": sink, "path": path, "table": "out", "jdbc": sqlite_jdbc_url(path)}
    if sink == "postgres":
        return {"sink": sink, "url": postgres.url, "table": f"out_{uuid.uuid4().hex[:12]}",
                "jdbc": postgres.jdbc_url}
    return {"sink": sink, "path": str(out / "dir")}


def _write(spark: Any, endpoints: list[str], rows: int, parts: int, target: dict[str, str],
           writer: str, job: str) -> float:
    """Rows per second of one write by `writer` (plain, fenced, jdbc, foreach, spark)
    into `target`."""
    df = spark.range(0, rows, numPartitions=parts).selectExpr("id", "cast(id as string) s")
    if writer == "spark":  # Spark's own Parquet writer, its file committer included
        start = time.perf_counter()
        df.write.mode("errorifexists").parquet(target["path"])
        return rows / (time.perf_counter() - start)
    if writer in ("jdbc", "foreach"):
        import pyarrow as pa

        from coord.bench.spark_foreach import row_inserter
        from coord.spark.sinks import SqlSink, open_sink

        options = {k: v for k, v in target.items() if k != "jdbc"}
        table = open_sink(options)
        assert isinstance(table, SqlSink)
        try:  # the table exists, as a user's does (Spark 4 cannot create one in SQLite)
            table.prepare(pa.schema([("id", pa.int64()), ("s", pa.string())]), plain=True)
        finally:
            table.close()
        start = time.perf_counter()
        if writer == "jdbc":
            df.write.jdbc(target["jdbc"], target["table"], mode="append",
                          properties={"driver": JDBC_DRIVERS[target["sink"]]})
        else:
            df.foreachPartition(row_inserter(options, target["table"]))
        return rows / (time.perf_counter() - start)
    w = (df.write.format("coord-fenced").mode("append")
         .option("endpoints", ",".join(endpoints)).option("job", job)
         .option("fence", "on" if writer == "fenced" else "off").option("version", "1"))
    for key, value in target.items():
        if key != "jdbc":
            w = w.option(key, value)
    start = time.perf_counter()
    w.save()
    return rows / (time.perf_counter() - start)


def _duplicates(target: dict[str, str]) -> int:
    """Rows of the written database table beyond its distinct ids (for the fenced
    writer, of its committed rows)."""
    from coord.spark.sinks import open_sink

    sink = open_sink({k: v for k, v in target.items() if k != "jdbc"})
    try:
        ids = sink.read().column("id")
        return len(ids) - len(ids.unique())
    finally:
        sink.close()


def _available(stack: ExitStack) -> tuple[dict[str, tuple[str, ...]], Any, list[str]]:
    """Each sink's writers, the PostgreSQL server (None without one), and what was left
    out and why."""
    from coord.testing.jdbc import missing_jars
    from coord.testing.peer_postgres import PostgresMissing, PostgresServer

    notes: list[str] = []
    jdbc: tuple[str, ...] = ("jdbc",)
    if missing_jars():
        notes.append(f"no jdbc rows: {', '.join(missing_jars())} missing")
        jdbc = ()
    writers = {"sqlite": ("plain", "fenced", *jdbc, "foreach"),
               "postgres": ("plain", "fenced", *jdbc, "foreach"),
               "parquet": ("plain", "fenced", "spark")}
    try:
        postgres = stack.enter_context(PostgresServer())
    except PostgresMissing as e:
        notes.append(f"no postgres rows: {e}")
        postgres = None
        del writers["postgres"]
    return writers, postgres, notes


def _fence_cost(endpoints: list[str], partitions: int) -> dict[str, dict[str, Any]]:
    """Each claim and commit-time check timed alone, and what the first claim asked of
    coord (`coord.testing.call_counts`: requests, and round trips waited for in a row —
    figures that do not depend on the machine)."""
    from coord.client import Client
    from coord.spark.attempt import check_run, claim, start_run
    from coord.testing.call_counts import counting

    claims: list[float] = []
    checks: list[float] = []
    asked: dict[str, Any] = {}
    with Client(endpoints) as client:
        run = start_run(client, "bench-cost")
        for p in range(partitions):
            start = time.perf_counter()
            with counting(client) as counts:
                session, attempt = claim(client, "bench-cost", p, run=run)
            claims.append(time.perf_counter() - start)
            asked = asked or counts.as_dict()
            session.detach()
            start = time.perf_counter()
            check_run(client, "bench-cost", run)
            checks.append(time.perf_counter() - start)
            client.close_session(attempt.session_id)
    return {"claim": latency_ms(claims), "commit_check": latency_ms(checks),
            "claim_calls": asked}


def _writes_table(figures: dict) -> BenchTable:
    """A row per sink and writer: its median rows/s, the fenced writer's median over it,
    and (on the databases) the most duplicate rows a write of it left; then the SQLite
    write with many partitions. Figures left out (no PostgreSQL, no JDBC drivers) are
    the notes."""
    rows: list[list[str]] = []
    for sink in (s for s in SINKS if s in figures):
        r = figures[sink]
        for writer in (k for k in r if k != "duplicates" and not k.startswith("fenced_over_")):
            dups = r.get("duplicates", {}).get(writer)
            rows.append([sink, cell(figures["partitions"]), writer, cell(r[writer]["median"]),
                         cell(r.get(f"fenced_over_{writer}")), cell(dups)])
    many = figures["many_partitions"]
    for writer in ("plain", "fenced"):
        rows.append(["sqlite", cell(many["partitions"]), writer,
                     cell(many[f"{writer}_rows_s"]),
                     cell(many["fenced_over_plain"] if writer == "plain" else None), ""])
    return BenchTable(["sink", "partitions", "writer", "rows/s", "fenced/writer",
                       "duplicate rows"], rows,
                      notes=[f"note: {n}" for n in figures.get("notes", [])],
                      title=(f"{figures['rows']:,} rows a write; rows/s: the median of "
                             f"{figures['runs']} runs (one run with many partitions)"))


def table(figures: dict) -> list[BenchTable]:
    """The tables `coord bench spark` prints, from its figures (as --json gives them):
    the writes, then the fence's own cost per partition."""
    cost = figures["fence_cost"]
    asked = cost.get("claim_calls")  # figures from before it was counted lack it
    notes = [f"a claim: {asked['calls']} requests to coord, {asked['waits']} waits for "
             f"them in a row"] if asked else []
    return [_writes_table(figures),
            BenchTable(["per partition", "p50 ms", "p99 ms"],
                       [["claim", cell(cost["claim"]["p50_ms"]), cell(cost["claim"]["p99_ms"])],
                        ["commit check", cell(cost["commit_check"]["p50_ms"]),
                         cell(cost["commit_check"]["p99_ms"])]], notes=notes,
                       title=(f"the fence's cost: {figures['cost_partitions']:,} "
                              "sequential claims, each timed alone"))]


def run_spark_bench(args: argparse.Namespace) -> int:
    from coord.testing import cluster

    results: dict[str, Any] = {"rows": args.rows, "partitions": args.partitions,
                               "runs": args.runs, "cost_partitions": args.cost_partitions}
    spark = _session()
    try:
        with ExitStack() as stack:
            writers, postgres, results["notes"] = _available(stack)
            c = stack.enter_context(cluster(members=3))
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            for writer in ("fenced", *writers["sqlite"][2:]):  # load Spark's code paths
                _write(spark, c.endpoints, 10_000, 2, _target("sqlite", tmp / f"warm-{writer}",
                                                               postgres), writer, "warm")
            _write(spark, c.endpoints, 10_000, 2, _target("parquet", tmp / "warm-spark",
                                                           postgres), "spark", "warm")
            for sink, kinds in writers.items():
                rates: dict[str, list[float | None]] = {k: [] for k in kinds}
                dups = dict.fromkeys(kinds, 0)
                for run in range(args.runs):
                    for kind in kinds:
                        target = _target(sink, tmp / f"{sink}-{kind}-{run}", postgres)
                        rate = _write(spark, c.endpoints, args.rows, args.partitions, target,
                                      kind, f"bench-{sink}-{run}")
                        rates[kind].append(rate)
                        if sink in JDBC_DRIVERS:  # the databases
                            dups[kind] = max(dups[kind], _duplicates(target))
                        log(f"{sink} {kind} run {run}: {rate:,.0f} rows/s")
                r: dict[str, Any] = {k: summarize(v) for k, v in rates.items()}
                for base in kinds:
                    if base != "fenced":
                        r[f"fenced_over_{base}"] = ratio(r["fenced"]["median"],
                                                         r[base]["median"])
                if sink in JDBC_DRIVERS:
                    r["duplicates"] = dups
                results[sink] = r
            results["fence_cost"] = _fence_cost(c.endpoints, args.cost_partitions)
            many = {}
            for kind in ("plain", "fenced"):
                many[kind] = _write(spark, c.endpoints, args.rows, args.many_partitions,
                                    _target("sqlite", tmp / f"many-{kind}", postgres), kind,
                                    "bench-many")
            results["many_partitions"] = {
                "partitions": args.many_partitions, "plain_rows_s": many["plain"],
                "fenced_rows_s": many["fenced"],
                "fenced_over_plain": ratio(many["fenced"], many["plain"])}
    finally:
        spark.stop()
    if args.json:
        print_json(args.run, results)
    else:
        print(printed(table(results)))
    return 0
