"""The sink checks: what a fenced sink accepted, from its exported log of accepted writes
(`coord.spark.sinks.log`), proves exactly-once on the sink's side.

The ordering evidence is the sink's own: the log's `id` is the order in which the sink
accepted writes, and per (job, partition) the sink serializes them under the fence row,
so within a partition "before" is exact. A token orders as (run, generation, pid,
epoch): a newer run, a newer ownership generation, a newer producer or a bumped epoch.
Each function takes the sink log's DataFrame and returns violation rows (the shape of
`coord.audit.checks.common.violations`; `index` is the log id, `revision` is null).
What coord's own history proves about the same log is `coord.audit.checks.sink_coord`'s.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from coord.audit.checks.common import violations

TOKEN = ("run", "generation", "pid", "epoch")
WRITES = ("append", "seal")


def token(prefix: str = "") -> Column:
    return F.struct(*[F.col(f"{prefix}{n}").alias(n) for n in TOKEN])


def cite_log(prefix: str = "") -> Column:
    """One log row as evidence: `log:id op job/partition run= generation= pid= epoch=
    granted_rev= seq= rows=` (granted_rev: coord's revision of the token's grant)."""
    col = (lambda n: F.col(f"{prefix}.{n}")) if prefix else F.col
    return F.concat_ws(
        " ", F.concat(F.lit("log:"), col("id").cast("string")), col("op"),
        F.concat(col("job"), F.lit("/"), col("partition").cast("string")),
        *[F.concat(F.lit(f"{n}="), col(n).cast("string")) for n in TOKEN],
        F.concat(F.lit("granted_rev="), col("revision").cast("string")),
        F.when(col("sequence").isNotNull(),
               F.concat(F.lit("seq="), col("sequence").cast("string"))),
        F.concat(F.lit("rows="), col("rows").cast("string")))


def cited_log() -> Column:
    return F.struct("id", "op", "job", "partition", *TOKEN, "revision", "sequence", "rows")


def subject() -> Column:
    return F.concat(F.lit("sink "), F.col("job"), F.lit("/"), F.col("partition"))


def per_partition() -> Any:
    return Window.partitionBy("job", "partition").orderBy("id")


def no_fenced_writes(log: Any) -> Any:
    """An accepted append or seal whose token is older than a token the sink had already
    accepted for the same (job, partition): a write from a fenced attempt got in."""
    writes = log.filter(F.col("op").isin(*WRITES))
    w = per_partition().rowsBetween(Window.unboundedPreceding, -1)
    ev = (writes.withColumn("newest", F.max(token()).over(w))
          .withColumn("newest_row", F.max(F.struct(token().alias("t"), cited_log().alias("r")))
                      .over(w).getField("r")))
    bad = ev.filter(F.col("newest").isNotNull() & (token() < F.col("newest")))
    return violations(
        bad, "sink.no_fenced_writes", F.col("id"), F.lit(None),
        subject(),
        F.concat(F.lit("the sink accepted "), F.col("op"), F.lit(" seq "),
                 F.col("sequence"), F.lit(" of pid "), F.col("pid"), F.lit(" epoch "),
                 F.col("epoch"), F.lit(" after it had accepted the newer pid "),
                 F.col("newest.pid"), F.lit(" epoch "), F.col("newest.epoch"),
                 F.lit(" (run "), F.col("newest.run"), F.lit(", generation "),
                 F.col("newest.generation"), F.lit(")")),
        F.array(F.when(F.col("newest_row").isNotNull(), cite_log("newest_row")), cite_log()))


def sequences(log: Any) -> Any:
    """Per producer (job, partition, token, version), the accepted sequences are exactly
    0, 1, ..., n - 1: no gap (a lost batch) and no repeat (a duplicate)."""
    keys = ["job", "partition", *TOKEN, "version"]
    per = (log.filter(F.col("op").isin(*WRITES)).groupBy(*keys)
           .agg(F.count("*").alias("n"), F.countDistinct("sequence").alias("distinct"),
                F.min("sequence").alias("lo"), F.max("sequence").alias("hi"),
                F.min("id").alias("id"),
                F.slice(F.sort_array(F.collect_list("sequence")), 1, 20).alias("seqs")))
    bad = per.filter((F.col("lo") != 0) | (F.col("hi") != F.col("n") - 1)
                     | (F.col("distinct") != F.col("n")))
    return violations(
        bad, "sink.sequences", F.col("id"), F.lit(None),
        F.concat(subject(), F.lit(" pid "), F.col("pid"), F.lit(" epoch "), F.col("epoch")),
        F.concat(F.lit("accepted "), F.col("n"), F.lit(" writes with sequences "),
                 F.col("lo"), F.lit(".."), F.col("hi"), F.lit(" ("), F.col("distinct"),
                 F.lit(" distinct): "),
                 F.when(F.col("distinct") != F.col("n"), F.lit("a sequence repeated"))
                 .otherwise(F.lit("a sequence missing"))),
        F.array(F.concat(F.lit("sequences "), F.concat_ws(",", F.col("seqs").cast(
            "array<string>")))))


def publish_holder(log: Any) -> Any:
    """A publish whose attempt did not hold the partition when it was published: the
    sink's last accepted write of that (job, partition) before the publish is not the
    seal of the same token (another attempt took over, or the attempt never sealed)."""
    w = per_partition().rowsBetween(Window.unboundedPreceding, -1)
    is_write = F.col("op").isin(*WRITES)
    ev = (log.withColumn("held", F.last(F.when(is_write, cited_log()), True).over(w)))
    held = F.col("held")
    holds = (held.isNotNull() & (held.getField("op") == "seal")
             & (F.struct(*[held.getField(n).alias(n) for n in TOKEN]) == token()))
    bad = ev.filter((F.col("op") == "publish") & ~holds)
    return violations(
        bad, "sink.publish_holder", F.col("id"), F.lit(None), subject(),
        F.concat(F.lit("published pid "), F.col("pid"), F.lit(" epoch "), F.col("epoch"),
                 F.lit(" (run "), F.col("run"), F.lit(") but the partition was held by "),
                 F.coalesce(F.concat(F.lit("pid "), held.getField("pid").cast("string"),
                                     F.lit(" epoch "), held.getField("epoch").cast("string"),
                                     F.lit(" ("), held.getField("op"), F.lit(")")),
                            F.lit("nothing"))),
        F.array(F.when(held.isNotNull(), cite_log("held")), cite_log()))
