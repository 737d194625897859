"""The log itself: indexes gap-free, the revision monotone and moving by at most one
per entry (coord's rule: one revision per state-changing command, none otherwise).

Both compare each command row with the next index by a self-join on `index + 1`: a
shuffle that scales, where a window over the whole log would pull it into one task.
The join carries each entry's (index, revision) alone — two longs, where the rows to
cite would be a dozen columns through two shuffles of the whole log — and only the
steps that break a rule go back for their rows (`_cite_back`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from coord.audit.checks.common import cite, violations

# At most this many bad steps come to the driver to be joined back to their rows by a
# broadcast (a scan of the log, no shuffle); a log broken in more places than this is
# joined back by a shuffle instead, so the driver never holds more.
BROADCAST_STEPS_MAX = 100_000


def _entries(df: Any) -> Any:
    return df.filter(F.col("seq") == 0)


def _steps(df: Any, how: str) -> Any:
    """(a_index, a_revision, b_index, b_revision): each entry a and the entries b at
    its index + 1 (`how`: inner, or left to keep an a that has none)."""
    e = _entries(df).select("index", "revision")
    a = e.select(F.col("index").alias("a_index"), F.col("revision").alias("a_revision"))
    b = e.select(F.col("index").alias("b_index"), F.col("revision").alias("b_revision"))
    return a.join(b, F.col("b_index") == F.col("a_index") + 1, how)


def _cite_back(df: Any, bad: Any, sides: tuple[str, ...]) -> Any:
    """`bad` (distinct steps, narrow) joined to the entries they name: for each side s
    in `sides` ("a", "b"), the entries at (s_index, s_revision) as alias s. Every entry
    with those values is joined, so the pairs are exactly the self-join's on whole rows.
    Runs a job now: up to BROADCAST_STEPS_MAX steps are collected and broadcast (none,
    in a sound history: the join goes away), more are joined by a shuffle."""
    bad = bad.distinct()
    few = bad.limit(BROADCAST_STEPS_MAX + 1).collect()
    if len(few) <= BROADCAST_STEPS_MAX:
        spark = df.sparkSession
        bad = F.broadcast(spark.createDataFrame(few, bad.schema))
    out = bad
    for s in sides:
        rows = _entries(df).alias(s)
        out = out.join(rows, (F.col(f"{s}.index") == F.col(f"{s}_index"))
                       & (F.col(f"{s}.revision") == F.col(f"{s}_revision")))
    return out


def revisions_monotone(df: Any) -> Any:
    step = F.col("b_revision") - F.col("a_revision")
    bad = _cite_back(df, _steps(df, "inner").filter((step < 0) | (step > 1)), ("a", "b"))
    return violations(
        bad, "revisions.monotone", F.col("b.index"), F.col("b.revision"),
        F.concat(F.lit("index "), F.col("b.index")),
        F.concat(F.lit("revision moved from "), F.col("a.revision"), F.lit(" to "),
                 F.col("b.revision"), F.lit(" in one entry (allowed: +0 or +1)")),
        F.array(cite("a"), cite("b")))


def gap_free(df: Any) -> Any:
    last = df.agg(F.max("index").alias("last"))
    ends = (_steps(df, "left").filter(F.col("b_index").isNull())
            .select("a_index", "a_revision").crossJoin(last)
            .filter(F.col("a_index") < F.col("last")))
    bad = _cite_back(df, ends, ("a",))
    return violations(
        bad, "log.gap_free", F.col("a.index") + 1, F.col("a.revision"),
        F.concat(F.lit("index "), F.col("a.index") + 1),
        F.concat(F.lit("no entry after index "), F.col("a.index"),
                 F.lit(" although the history goes on to "), F.col("last")),
        F.array(cite("a")))
