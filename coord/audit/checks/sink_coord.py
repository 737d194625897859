"""The sink log joined with coord's exported history: what coord's own record proves
about the writes a fenced sink accepted, beyond the sink's own order
(`coord.audit.checks.sink`).

The exported sink log (`coord.spark.sinks.log.EXPORT_SCHEMA`) carries, in every row,
the writer's token with coord's revision of its ownership grant, and the names coord
keeps the (job, partition) under: the ownership group and resource, the producer key.
`tokens` finds each distinct token of the log in coord's history: its grant (the
owner.grant or owner.reset row of that group and resource at that generation and
revision), the row that ended the grant (the resource's next owner.* row: a takeover,
a release, an expiry or a sever; none while it was still held when the history ends)
and the init_producer row that issued the token's (pid, epoch) under the producer key.

What the join can prove, and what it cannot. The sink has no coord revision of its own:
when it accepts a row it does not know how far coord has got. What it has is its order
per (job, partition), exact under the fence row's lock, and in every row the revision at
which coord granted that row's token. So "coord had already fenced token T when the sink
accepted row X of T" is provable exactly when an earlier row of the same partition, in
the sink's order, carries a token coord granted at or after the revision at which coord
ended T's grant: the sink had been shown coord's takeover before it accepted X. A row
of an ended grant that no newer token had yet reached the sink is not a violation: no
fencing token can refuse a zombie before its successor reaches the sink, and the checks
do not claim otherwise. Run numbers are the sink's (`sink.no_fenced_writes` orders by
them); a streaming query's run lives under another group than its partitions, so the
join does not look runs up.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from coord.audit.checks.common import cite_row, cited, violations
from coord.audit.checks.ownership import GRANTS
from coord.audit.checks.sink import WRITES, cite_log, cited_log, per_partition, subject

KEY = ("job", "partition", "generation", "revision", "pid", "epoch")
"""A token as the log names it: the ownership grant (generation, revision) and the
producer (pid, epoch) of one (job, partition)."""


def tokens(history: Any, log: Any) -> Any:
    """One row per distinct token of `log` (KEY, its coord names, `first`: its first
    sink row), with coord's `grant_row`, `end_row` and `producer_row` (`common.cited`
    structs; null where coord's history has none)."""
    toks = (log.groupBy(*KEY, "group", "resource", "producer")
            .agg(F.min(cited_log()).alias("first")))  # the struct orders by id first
    claims = F.broadcast(toks.select("group", "resource").distinct())
    w = Window.partitionBy("group", "resource").orderBy("index", "seq")
    grants = (history.filter(F.col("kind").startswith("owner."))
              .join(claims, ["group", "resource"], "left_semi")
              .withColumn("end_row", F.lead(cited()).over(w))
              .filter(F.col("kind").isin(*GRANTS))
              .select("group", "resource", "generation", "revision",
                      cited().alias("grant_row"), "end_row"))
    keys = F.broadcast(toks.select(F.col("producer").alias("topic")).distinct())
    producers = (history.filter((F.col("kind") == "init_producer") & F.col("ok"))
                 .join(keys, "topic", "left_semi")
                 .groupBy(F.col("topic").alias("producer"), "pid", "epoch")
                 .agg(F.min(cited()).alias("producer_row")))  # the first, by index
    return (toks.join(grants, ["group", "resource", "generation", "revision"], "left")
            .join(producers, ["producer", "pid", "epoch"], "left"))


def _in(name: str, field: str) -> Column:
    return F.col(name).getField(field)


def tokens_granted(log: Any, toks: Any) -> Any:
    """Every token the sink accepted was handed out by coord: coord's history has its
    grant (this group and resource, at this generation and revision) and issued its
    (pid, epoch) under the partition's producer key after that grant and before the
    grant ended, as a claim does (own, init the producer, see it still owned). A token
    coord never granted, or a producer epoch not issued during the grant, is a
    violation, cited with the token's first sink row and what coord's history has."""
    grant, end, init = F.col("grant_row"), F.col("end_row"), F.col("producer_row")
    early = _in("producer_row", "index") <= _in("grant_row", "index")
    late = end.isNotNull() & (_in("producer_row", "index") >= _in("end_row", "index"))
    bad = toks.filter(grant.isNull() | init.isNull() | early | late)
    token = F.concat(F.lit("generation "), F.col("generation"), F.lit(" (revision "),
                     F.col("revision"), F.lit(") pid "), F.col("pid"), F.lit(" epoch "),
                     F.col("epoch"))
    return violations(
        bad, "sink.tokens_granted", _in("first", "id"),
        F.col("revision"), subject(),
        F.concat(F.lit("the sink accepted "), token, F.lit(", but "), F.when(
            grant.isNull(), F.concat(F.lit("coord's history has no grant of "),
                                     F.col("group"), F.lit("/"), F.col("resource"),
                                     F.lit(" at that generation and revision")))
            .when(init.isNull(), F.concat(F.lit("coord never issued that pid and epoch "
                                                "under "), F.col("producer")))
            .when(early, F.lit("coord issued that producer epoch before the grant"))
            .otherwise(F.lit("coord issued that producer epoch after the grant had "
                             "ended"))),
        F.array(cite_log("first"), cite_row("grant_row"), cite_row("producer_row"),
                F.when(late, cite_row("end_row"))))


def _after_coord_ended(log: Any, toks: Any, ops: tuple[str, ...]) -> Any:
    """The rows of `ops` whose token's grant coord's history shows ended at a revision
    at or below the grant of a token the sink had accepted earlier in the same partition
    (`newest`: the highest such grant revision before the row, with its sink row; only
    tokens coord's history shows granted count, a forged one is `tokens_granted`'s)."""
    before = per_partition().rowsBetween(Window.unboundedPreceding, -1)
    coord = F.broadcast(toks.select(*KEY, F.col("grant_row").isNotNull().alias("granted"),
                                    "end_row"))
    newest = F.max(F.when(F.col("granted"), F.struct(F.col("revision").alias("revision"),
                                                     cited_log().alias("row"))))
    return (log.join(coord, list(KEY), "left")
            .withColumn("newest", newest.over(before))
            .filter(F.col("op").isin(*ops) & F.col("end_row").isNotNull()
                    & (_in("newest", "revision") >= _in("end_row", "revision"))))


def _fenced_detail(what: Column) -> Column:
    return F.concat(
        what, F.lit(" of the grant at revision "), F.col("revision"),
        F.lit(" after it had accepted a token coord granted at revision "),
        F.col("newest.revision"), F.lit("; coord's history ended that grant at revision "),
        _in("end_row", "revision"), F.lit(" ("), _in("end_row", "kind"), F.lit(")"))


def coord_fenced_writes(log: Any, toks: Any) -> Any:
    """No append or seal was accepted from a token coord had fenced by then, by coord's
    history: the row's grant had ended (coord's history: a takeover, release, expiry or
    sever, at revision e) and the sink had already accepted, in that partition, a token
    coord granted at revision >= e, so coord's takeover had reached the sink before it
    accepted the write."""
    bad = _after_coord_ended(log, toks, WRITES)
    return violations(
        bad, "sink.coord_fenced_writes", F.col("id"), _in("end_row", "revision"), subject(),
        _fenced_detail(F.concat(F.lit("the sink accepted "), F.col("op"), F.lit(" seq "),
                                F.col("sequence"))),
        F.array(cite_log("newest.row"), cite_row("end_row"), cite_log()))


def coord_publish_holder(log: Any, toks: Any) -> Any:
    """No publish was of an attempt coord had taken the partition from by then, by
    coord's history: as `coord_fenced_writes`, for publishes. A publish after the
    attempt's session ended with no newer token in the sink is not flagged: the first
    attempt to seal is published even if a later copy's claim severed it, and the sink
    cannot know coord's revision when it publishes."""
    bad = _after_coord_ended(log, toks, ("publish",))
    return violations(
        bad, "sink.coord_publish_holder", F.col("id"), _in("end_row", "revision"),
        subject(), _fenced_detail(F.lit("the sink published the attempt")),
        F.array(cite_log("newest.row"), cite_row("end_row"), cite_log()))


def refusal_holder_granted(refusals: Any, history: Any) -> Any:
    """Every write the sink refused as fenced was refused on behalf of a holder coord
    granted after the refused token: coord's history has the grant of the partition's
    group and resource at the fence row's (`held_*`) generation and revision, and that
    revision is above the refused token's grant revision. A holder coord never granted
    (a forged or corrupted fence row refused a live writer) or one older than the token
    it refused is a violation, cited with the grant coord's history has, if any. A
    refusal of a sequence (the holder's own out-of-order write) names no other holder
    and is not judged."""
    fenced = refusals.filter(F.col("verdict") == "FENCED_GENERATION")
    grants = (history.filter(F.col("kind").isin(*GRANTS))
              .join(F.broadcast(fenced.select("group", "resource").distinct()),
                    ["group", "resource"], "left_semi")
              .select("group", "resource", F.col("generation").alias("held_generation"),
                      F.col("revision").alias("held_revision"), cited().alias("grant_row")))
    joined = fenced.join(grants, ["group", "resource", "held_generation", "held_revision"],
                         "left")
    missing = F.col("grant_row").isNull()
    bad = joined.filter(missing | (F.col("held_revision") <= F.col("revision")))
    return violations(
        bad, "sink.refusal_holder_granted", _in("grant_row", "index"), F.col("revision"),
        subject(),
        F.concat(F.lit("the sink refused generation "), F.col("generation"),
                 F.lit(" (revision "), F.col("revision"), F.lit(") seq "), F.col("sequence"),
                 F.lit(" for holder generation "), F.col("held_generation"),
                 F.lit(" (revision "), F.col("held_revision"), F.lit("), but "),
                 F.when(missing, F.concat(F.lit("coord's history has no grant of "),
                                          F.col("group"), F.lit("/"), F.col("resource"),
                                          F.lit(" at that generation and revision")))
                 .otherwise(F.lit("coord granted that holder no later than the refused "
                                  "token"))),
        F.array(_cite_refusal(), F.when(~missing, cite_row("grant_row"))))


def _cite_refusal() -> Column:
    """One refusal as evidence: `refused job/partition generation= pid= epoch= run=
    granted_rev= seq= held: generation= pid= epoch= run= granted_rev=`."""
    def token(prefix: str) -> list[Column]:
        return [F.concat(F.lit(f"{n}="), F.col(f"{prefix}{n}").cast("string"))
                for n in ("generation", "pid", "epoch", "run")] + [
            F.concat(F.lit("granted_rev="), F.col(f"{prefix}revision").cast("string"))]
    return F.concat_ws(" ", F.lit("refused"),
                       F.concat(F.col("job"), F.lit("/"), F.col("partition").cast("string")),
                       *token(""), F.concat(F.lit("seq="), F.col("sequence").cast("string")),
                       F.lit("held:"), *token("held_"))
