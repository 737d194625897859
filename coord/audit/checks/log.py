"""The log itself: indexes gap-free, the revision monotone and moving by at most one
per entry (coord's rule: one revision per state-changing command, none otherwise).

Both compare each command row with the next index by a self-join on `index + 1`: a
shuffle that scales, where a window over the whole log would pull it into one task.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from coord.audit.checks.common import cite, violations


def _pairs(df: Any) -> Any:
    entries = df.filter(F.col("seq") == 0)
    a, b = entries.alias("a"), entries.alias("b")
    return a.join(b, F.col("b.index") == F.col("a.index") + 1, "left")


def revisions_monotone(df: Any) -> Any:
    p = _pairs(df).filter(F.col("b.index").isNotNull())
    step = F.col("b.revision") - F.col("a.revision")
    bad = p.filter((step < 0) | (step > 1))
    return violations(
        bad, "revisions.monotone", F.col("b.index"), F.col("b.revision"),
        F.concat(F.lit("index "), F.col("b.index")),
        F.concat(F.lit("revision moved from "), F.col("a.revision"), F.lit(" to "),
                 F.col("b.revision"), F.lit(" in one entry (allowed: +0 or +1)")),
        F.array(cite("a"), cite("b")))


def gap_free(df: Any) -> Any:
    last = df.agg(F.max("index").alias("last"))
    p = _pairs(df).crossJoin(last)
    bad = p.filter(F.col("b.index").isNull() & (F.col("a.index") < F.col("last")))
    return violations(
        bad, "log.gap_free", F.col("a.index") + 1, F.col("a.revision"),
        F.concat(F.lit("index "), F.col("a.index") + 1),
        F.concat(F.lit("no entry after index "), F.col("a.index"),
                 F.lit(" although the history goes on to "), F.col("last")),
        F.array(cite("a")))
