"""Figures about how ownership and leadership behaved, computed in Spark; the driver
collects only aggregates (percentiles, histogram buckets, per-bucket counts) and the
few rows that are small by nature (leader changes, quorum-loss periods)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

PERCENTILES = (0.5, 0.9, 0.99)
MAX_TIME_BUCKETS = 200


def _distribution(df: Any, col: str) -> dict[str, Any]:
    """Count, percentiles and log2-bucket histogram (bucket b: [2^b, 2^(b+1)) ms)."""
    agg = df.agg(F.count(col).alias("n"), F.min(col).alias("min"), F.max(col).alias("max"),
                 F.percentile_approx(col, list(PERCENTILES), 1000).alias("p")).first()
    buckets = (df.groupBy(F.floor(F.log2(F.col(col) + 1)).cast("int").alias("b"))
               .count().orderBy("b").collect())
    return {"count": agg["n"], "min_ms": agg["min"], "max_ms": agg["max"],
            "percentiles_ms": dict(zip([f"p{int(p * 100)}" for p in PERCENTILES],
                                       agg["p"] or [], strict=False)),
            "histogram_log2_ms": [[r["b"], r["count"]] for r in buckets]}


def tenure(df: Any) -> dict[str, Any]:
    """How long each grant lasted: to the resource's next ownership change."""
    w = Window.partitionBy("group", "resource").orderBy("index", "seq")
    ev = (df.filter(F.col("kind").startswith("owner."))
          .withColumn("next_ms", F.lead("time_ms").over(w))
          .filter(F.col("kind").isin("owner.grant", "owner.reset") & F.col("next_ms").isNotNull())
          .select((F.col("next_ms") - F.col("time_ms")).alias("tenure_ms")))
    return _distribution(ev, "tenure_ms")


def takeover(df: Any) -> dict[str, Any]:
    """After an owner's session expired (it died), how long until someone owned the
    resource again."""
    w = Window.partitionBy("group", "resource").orderBy("index", "seq")
    ev = (df.filter(F.col("kind").startswith("owner."))
          .withColumn("next_kind", F.lead("kind").over(w))
          .withColumn("next_ms", F.lead("time_ms").over(w))
          .filter((F.col("kind") == "owner.expire")
                  & F.col("next_kind").isin("owner.grant", "owner.reset"))
          .select((F.col("next_ms") - F.col("time_ms")).alias("takeover_ms")))
    return _distribution(ev, "takeover_ms")


def timeline(df: Any) -> dict[str, Any]:
    """Leader changes (one per term: its note_leader, or its first entry) and the
    periods members spent without a quorum."""
    # a term's no-op and membership entries carry the previous leader's clock: its own
    # first timed entry says when it began
    timed = F.when(~F.col("kind").isin("noop", "conf_change"), F.col("time_ms"))
    terms = (df.groupBy("term").agg(
        F.coalesce(F.min(timed), F.min("time_ms")).alias("time_ms"),
        F.max("leader").alias("leader"))
        .orderBy("term").collect())
    notes = (df.filter((F.col("kind") == "note_quorum_lost") & F.col("ok"))
             .select("member", "mode", "since_ms", "until_ms").orderBy("since_ms").collect())
    return {"terms": [[r["term"], r["time_ms"], r["leader"]] for r in terms],
            "quorum_lost": [[r["member"], r["mode"], r["since_ms"], r["until_ms"]]
                            for r in notes]}


def ops_rate(df: Any, span: tuple[int, int]) -> dict[str, Any]:
    """Committed commands per second by kind, in at most MAX_TIME_BUCKETS buckets."""
    lo, hi = span
    bucket_ms = max(1000, -(-(hi - lo + 1) // MAX_TIME_BUCKETS) // 1000 * 1000)
    rows = (df.filter(F.col("seq") == 0)
            .groupBy(F.floor((F.col("time_ms") - lo) / bucket_ms).alias("b"), "kind")
            .count().collect())
    series: dict[str, dict[int, float]] = {}
    for r in rows:
        series.setdefault(r["kind"], {})[int(r["b"])] = r["count"] * 1000 / bucket_ms
    return {"start_ms": lo, "bucket_ms": bucket_ms,
            "per_kind": {k: sorted(v.items()) for k, v in sorted(series.items())}}


def overview(df: Any) -> dict[str, Any]:
    r = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(F.col("seq") == 0, 1).otherwise(0)).alias("entries"),
        F.min("index").alias("first_index"), F.max("index").alias("last_index"),
        F.min("revision").alias("first_revision"), F.max("revision").alias("last_revision"),
        F.min("time_ms").alias("first_ms"), F.max("time_ms").alias("last_ms"),
        F.countDistinct("term").alias("terms"),
        F.sum(F.when(F.col("kind") == "open_session", 1).otherwise(0)).alias("sessions_opened"),
        F.sum(F.when(F.col("kind") == "session.expired", 1).otherwise(0))
        .alias("sessions_expired"),
        F.sum(F.when(F.col("kind") == "session.severed", 1).otherwise(0))
        .alias("sessions_severed"),
        F.sum(F.when(F.col("kind").isin("owner.grant", "owner.reset"), 1).otherwise(0))
        .alias("grants"),
    ).first()
    return {k: (int(v) if v is not None else None) for k, v in r.asDict().items()}
