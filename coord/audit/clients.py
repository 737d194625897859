"""Per-key linearizability of a recorded client history, on Spark.

The history is JSONL, one event per line, Jepsen/Porcupine style (invoke / ok / fail /
info with `time_ns`; the format is `coord.check.history`'s). Spark reads the lines,
keeps the register operations that name a key, and groups them by key across the
executors; each key's rows go through `coord.check.linearizable.check_key` — the one
implementation of the search (Wing–Gong with Lowe's memoisation), bounded per key in
time and in states — in a grouped pandas function. Only one row per key (its verdict)
comes back: ok, illegal (with the smallest failing window the search names: the op no
order could place, the ops concurrent with it, the value the register held), unknown
(a bound was hit: never a guess) or malformed (the key's rows do not pair up).
"""

from __future__ import annotations

import json
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


def check_group(pdf: Any, time_limit_s: float, max_states: int) -> Any:
    """One key's events (a pandas frame) -> its verdict (a one-row frame). Runs on the
    executors; imports there."""
    import pandas as pd

    from coord.check.history import HistoryError
    from coord.check.linearizable import check_key

    rows = [json.loads(line) for line in pdf["line"]]
    key = str(pdf["key"].iloc[0])
    out: dict[str, Any] = {"key": key, "ops": 0, "skipped": 0, "states": 0, "seconds": 0.0,
                           "reason": None, "op_index": None, "detail": None, "evidence": None,
                           "window": None}
    try:
        result = check_key(rows, time_limit_s=time_limit_s, max_states=max_states)
    except HistoryError as exc:
        return pd.DataFrame([{**out, "verdict": "malformed", "reason": str(exc)}])
    out.update(verdict=result.verdict, ops=result.ops, skipped=result.skipped,
               states=result.states, seconds=result.elapsed_s, reason=result.reason or None)
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
             max_states: int = DEFAULT_MAX_STATES) -> Any:
    """One row per key (VERDICT_SCHEMA)."""
    return load_events(spark, path).groupBy("key").applyInPandas(
        lambda pdf: check_group(pdf, time_limit_s, max_states), VERDICT_SCHEMA)


def violations(found: Any) -> Any:
    """The illegal keys, in the audit's violation shape (evidence: the failing window's
    rows, the blocked op first)."""
    from pyspark.sql import functions as F

    from coord.audit.checks.common import violations as shaped

    illegal = found.filter(F.col("verdict") == "illegal")
    return shaped(illegal, CHECK, F.col("op_index"), F.lit(None), F.concat(
        F.lit("key "), F.col("key")), F.col("detail"), F.col("evidence"))
