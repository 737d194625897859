"""`coord audit`: load a history, run the checkers, gather the figures, report.

A Parquet history is not persisted: each checker reads the files itself, and Spark
reads only the `kind` partitions and the columns it needs, skipping row groups by their
statistics (`seq = 0` skips every effect file). A persisted copy of the whole history
was slower at 1M commands and ran the driver's 1 GB heap out at 10M (README, "History
export and the Spark audit"). A JSON-lines history is parsed once and persisted.
Each checker's violations are counted in Spark and only the first few per check come
back to the driver, with the rows that show them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coord.audit import stats
from coord.audit.changes import changes as audit_trail
from coord.audit.checks import CHECKS, SINK_CHECKS
from coord.audit.load import load_history
from coord.history.schema import SCHEMA_VERSION
from coord.history.sink import read_manifest

EXAMPLES_PER_CHECK = 20


@dataclass
class AuditResult:
    summary: dict[str, Any]
    report: Path | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return int(self.summary["violations"])

    def count(self, check: str) -> int:
        return int(self.summary["checks"][check]["violations"])


def run_audit(spark: Any, history: str | Path, *, checks: Iterable[str] | None = None,
              report_dir: str | Path | None = None, with_stats: bool = True,
              combined: bool = False, oplog: str | Path | None = None,
              key_time_limit_s: float | None = None,
              oplog_budget_s: float | None = None,
              sink_log: str | Path | None = None,
              on_step: Callable[[str], None] = lambda _s: None) -> AuditResult:
    """`combined`: run every check in one Spark job (a union, counted by check) instead
    of one job per check: fewer, bigger jobs, but no time per check. `oplog`:
    a recorded oplog (JSONL) whose keys are checked for linearizability too
    (`clients.linearizable`, each key bounded by `key_time_limit_s`, the whole check by
    `oplog_budget_s`: keys left past it are unknown). `sink_log`: a directory of a fenced
    sink's exported log of accepted writes and refusals
    (`coord.spark.sinks.log.export_log`), checked
    by every `SINK_CHECKS` as well, joined with this history (named checks from there
    run too)."""
    from pyspark import StorageLevel

    requested = list(CHECKS if checks is None else checks)
    unknown = [n for n in requested if n not in CHECKS and n not in SINK_CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; known: {sorted(CHECKS | SINK_CHECKS)}")
    names = [n for n in requested if n in CHECKS]
    sink_names = [n for n in (SINK_CHECKS if checks is None else requested)
                  if n in SINK_CHECKS]
    if sink_names and sink_log is None and checks is not None:
        raise ValueError(f"checks {sink_names} need a sink log (--sink-log)")
    started = time.monotonic()
    on_step("loading the history")
    df = load_history(spark, history)
    # Parquet: each check reads what it needs (see above); JSON lines: parsed once
    persisted = (read_manifest(history) or {}).get("format") == "jsonl"
    if persisted:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
    summary: dict[str, Any] = {"history": str(history), "schema_version": SCHEMA_VERSION,
                               "master": spark.sparkContext.master, "checks": {},
                               # the export ended on a member without a quorum: the
                               # cluster may have committed past the history's last entry
                               "read_only": (read_manifest(history) or {}).get("read_only")}
    t = time.monotonic()
    summary["overview"] = stats.overview(df)
    summary["load_seconds"] = time.monotonic() - t
    examples: list[dict[str, Any]] = []
    if combined:
        on_step(f"{len(names)} checks in one job")
        t = time.monotonic()
        counts, examples = _combined(df, names)
        seconds = time.monotonic() - t
        summary["checks"] = {n: {"violations": counts.get(n, 0), "seconds": None}
                             for n in names}
        summary["checks_seconds"] = seconds
    for name in [] if combined else names:
        on_step(f"check {name}")
        examples += _run_check(CHECKS[name], name, summary, df)
    if sink_log is not None:
        summary["sink_log"] = str(sink_log)
        examples += _sink_checks(spark, sink_log, df, sink_names, summary, on_step)
    if oplog is not None:
        on_step("per-key linearizability of the oplog")
        examples += _clients(spark, oplog, key_time_limit_s, oplog_budget_s, summary)
    summary["violations"] = sum(c["violations"] for c in summary["checks"].values())
    summary["examples"] = examples
    if with_stats:
        on_step("the auth and admin changes")
        t = time.monotonic()
        summary["changes"] = audit_trail(df)
        summary["changes_seconds"] = time.monotonic() - t
        on_step("ownership and leadership figures")
        t = time.monotonic()
        o = summary["overview"]
        summary["stats"] = {
            "tenure": stats.tenure(df), "takeover": stats.takeover(df),
            "timeline": stats.timeline(df),
            "ops_rate": stats.ops_rate(df, (o["first_ms"] or 0, o["last_ms"] or 0)),
        }
        summary["stats_seconds"] = time.monotonic() - t
    if persisted:
        df.unpersist()
    summary["seconds"] = time.monotonic() - started
    rows = summary["overview"]["rows"] or 0
    summary["rows_per_second"] = rows / summary["seconds"] if summary["seconds"] else 0.0
    report = None
    if report_dir is not None:
        if not with_stats:
            raise ValueError("a report needs the figures (with_stats)")
        on_step("writing the report")
        from coord.audit.report import write_report

        report = write_report(Path(report_dir), summary)
    return AuditResult(summary, report, examples)


def _run_check(checker: Callable[..., Any], name: str, summary: dict[str, Any],
               *inputs: Any) -> list[dict[str, Any]]:
    """One checker over `inputs`, timed, its violations counted into `summary`; the
    first few back."""
    from pyspark import StorageLevel

    t = time.monotonic()
    found = checker(*inputs).persist(StorageLevel.MEMORY_AND_DISK)
    n = found.count()
    examples = []
    if n:
        examples = [r.asDict() for r in found.orderBy("index").limit(EXAMPLES_PER_CHECK)
                    .collect()]
    found.unpersist()
    summary["checks"][name] = {"violations": n, "seconds": time.monotonic() - t}
    return examples


def _sink_checks(spark: Any, path: str | Path, history: Any, names: list[str],
                 summary: dict[str, Any],
                 on_step: Callable[[str], None]) -> list[dict[str, Any]]:
    """The sink checks over the exported sink log and its refusals, joined with coord's
    history through the log's tokens (one row per attempt, persisted: every join check
    reads them):
    counted in Spark, the first few violations per check back to the driver."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from coord.audit.checks.sink_coord import tokens
    from coord.spark.sink_log_files import LOG_FILE, REFUSALS_FILE

    started = time.monotonic()
    log = (spark.read.parquet(str(Path(path) / LOG_FILE))
           .persist(StorageLevel.MEMORY_AND_DISK))
    summary["sink_log_rows"] = log.count()
    refusals = spark.read.parquet(str(Path(path) / REFUSALS_FILE))
    toks = tokens(history, log).persist(StorageLevel.MEMORY_AND_DISK)
    # how many attempts the log holds, and how many of them the join found in coord's
    joined = toks.agg(F.count("*").alias("tokens"),
                      F.count("grant_row").alias("granted_in_history")).first()
    summary["sink_tokens"] = joined.asDict()
    examples: list[dict[str, Any]] = []
    for name in names:
        on_step(f"check {name}")
        examples += _run_check(SINK_CHECKS[name], name, summary, log, toks, history,
                               refusals)
    toks.unpersist()
    log.unpersist()
    summary["sink_seconds"] = time.monotonic() - started  # the log read, joined, checked
    return examples


def _clients(spark: Any, path: str | Path, time_limit_s: float | None,
             budget_s: float | None, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Verdicts per key, counted in Spark; back to the driver: the counts, the first
    illegal keys (as violations) and the first keys left unknown or malformed."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from coord.audit import clients

    t = time.monotonic()
    limits = {} if time_limit_s is None else {"time_limit_s": time_limit_s}
    found = clients.verdicts(spark, str(path), budget_s=budget_s,
                             **limits).persist(StorageLevel.MEMORY_AND_DISK)
    counts = {r["verdict"]: r["count"] for r in found.groupBy("verdict").count().collect()}
    examples = []
    if counts.get("illegal"):
        examples = [r.asDict() for r in clients.violations(found).orderBy("index")
                    .limit(EXAMPLES_PER_CHECK).collect()]
    undecided = [r.asDict() for r in found.filter(F.col("verdict").isin("unknown", "malformed"))
                 .select("key", "verdict", "reason").orderBy("key")
                 .limit(EXAMPLES_PER_CHECK).collect()]
    found.unpersist()
    seconds = time.monotonic() - t
    summary["checks"][clients.CHECK] = {"violations": counts.get("illegal", 0),
                                        "seconds": seconds}
    summary["clients"] = {"oplog": str(path), "budget_s": budget_s,
                          "keys": sum(counts.values()),
                          **{v: counts.get(v, 0) for v in clients.VERDICTS},
                          "undecided": undecided}
    return examples


def _combined(df: Any, names: list[str]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    from functools import reduce

    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    found = reduce(lambda a, b: a.unionByName(b), (CHECKS[n](df) for n in names))
    found = found.persist(StorageLevel.MEMORY_AND_DISK)
    counts = {r["check"]: r["count"] for r in found.groupBy("check").count().collect()}
    examples = []
    if counts:
        rank = F.row_number().over(Window.partitionBy("check").orderBy("index"))
        examples = [r.asDict() for r in found.withColumn("_n", rank)
                    .filter(F.col("_n") <= EXAMPLES_PER_CHECK).drop("_n")
                    .orderBy("check", "index").collect()]
    found.unpersist()
    return counts, examples
