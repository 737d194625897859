"""Per-key linearizability of a recorded oplog, on Spark.

The oplog is JSONL, one event per line, Jepsen/Porcupine style (invoke / ok / fail /
info with `time_ns`; the format is `coord.check.oplog`'s). Spark reads the lines,
keeps the register operations that name a key, and groups them by key across the
executors; each key's rows go through `coord.check.linearizable.check_key` — the one
implementation of the search (Wing–Gong with Lowe's memoisation), bounded per key in
time and in states — in a grouped pandas function. Only one row per key (its verdict)
comes back: ok, illegal (with the smallest failing window the search names: the op no
order could place, the ops concurrent with it, the value the register held), unknown
(a bound was hit: never a guess) or malformed (the key's rows do not pair up).

A budget bounds the whole check as `time_limit_s` bounds one key: a wall-clock deadline
fixed on the driver when the check starts, which every executor reads (their clocks are
assumed in step, as NTP keeps a cluster's). A key whose search begins past it is not
searched, and one under way stops at it; both are unknown, their reason naming the
budget.
"""

from __future__ import annotations

import json
import time
from typing import Any

from coord.check.linearizable import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIME_LIMIT_S,
    FUNCTIONS,
)

CHECK = "clients.linearizable"
VERDICT_SCHEMA = ("key string, verdict string, ops long, skipped long, states long, "
                  "seconds double, reason string, op_index long, detail string, "
                  "evidence array<string>, window string")
VERDICTS = ("ok", "illegal", "unknown", "malformed")


def load_events(spark: Any, path: str) -> Any:
    """The register events that name a key: (key, f, line)."""
    from pyspark.sql import functions as F

    lines = spark.read.text(str(path))
    return (lines.select(F.get_json_object("value", "$.key").alias("key"),
                         F.get_json_object("value", "$.f").alias("f"),
                         F.col("value").alias("line"))
            .filter(F.col("key").isNotNull() & F.col("f").isin(*FUNCTIONS)))


def budget_reason(budget_s: float, during: str = "") -> str:
    if during:
        return f"the oplog budget ({budget_s:g} s) ran out during this key's " \
               f"search: {during}"
    return f"the oplog budget ({budget_s:g} s) was spent before this key's search began"


def check_group(pdf: Any, time_limit_s: float, max_states: int,
                deadline: float | None = None, budget_s: float = 0.0) -> Any:
    """One key's events (a pandas frame) -> its verdict (a one-row frame). Runs on the
    executors; imports there. `deadline` (wall clock, `time.time()`): the whole check's
    budget of `budget_s` seconds ends then."""
    import pandas as pd

    from coord.check.linearizable import check_key
    from coord.check.oplog import OplogError

    rows = [json.loads(line) for line in pdf["line"]]
    key = str(pdf["key"].iloc[0])
    out: dict[str, Any] = {"key": key, "ops": 0, "skipped": 0, "states": 0, "seconds": 0.0,
                           "reason": None, "op_index": None, "detail": None, "evidence": None,
                           "window": None}
    limit, by_budget = time_limit_s, False
    if deadline is not None:
        left = deadline - time.time()
        if left <= 0:
            return pd.DataFrame([{**out, "verdict": "unknown", "reason": budget_reason(budget_s)}])
        limit, by_budget = min(time_limit_s, left), left < time_limit_s
    try:
        result = check_key(rows, time_limit_s=limit, max_states=max_states)
    except OplogError as exc:
        return pd.DataFrame([{**out, "verdict": "malformed", "reason": str(exc)}])
    reason = result.reason or None
    if by_budget and reason and reason.startswith("time limit"):
        reason = budget_reason(budget_s, reason)
    out.update(verdict=result.verdict, ops=result.ops, skipped=result.skipped,
               states=result.states, seconds=result.elapsed_s, reason=reason)
    if result.anomaly is not None:
        a = result.anomaly
        cited = [a["op"], *a["concurrent"]]  # the blocked op first, then its window
        out.update(op_index=a["op"][0].get("index"), detail=a["message"],
                   evidence=[json.dumps(row, default=str) for op in cited for row in op],
                   window=json.dumps({"op": a["op"], "concurrent": a["concurrent"],
                                      "written_by": a.get("written_by", []),
                                      "state": a["state"]}, default=str))
    return pd.DataFrame([out])


def verdicts(spark: Any, path: str, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
             max_states: int = DEFAULT_MAX_STATES, budget_s: float | None = None) -> Any:
    """One row per key (VERDICT_SCHEMA); with `budget_s`, the check's deadline is that
    many seconds from now (run an action at once)."""
    deadline = None if budget_s is None else time.time() + budget_s
    budget = budget_s or 0.0
    return load_events(spark, path).groupBy("key").applyInPandas(
        lambda pdf: check_group(pdf, time_limit_s, max_states, deadline, budget),
        VERDICT_SCHEMA)


def violations(found: Any) -> Any:
    """The illegal keys, in the audit's violation shape (evidence: the failing window's
    rows, the blocked op first)."""
    from pyspark.sql import functions as F

    from coord.audit.checks.common import violations as shaped

    illegal = found.filter(F.col("verdict") == "illegal")
    return shaped(illegal, CHECK, F.col("op_index"), F.lit(None), F.concat(
        F.lit("key "), F.col("key")), F.col("detail"), F.col("evidence"))
