"""Ownership: one owner per (group, resource) at any revision, a takeover always severs
the previous owner, nothing is granted to a session that ended, generations strictly
increase per resource (except the generation-0 reset to 1 of Kafka's single
reader/writer specification), and fencing tokens (generation, revision) only move forward.

All of them read the owner.* effect rows — what the state machine reported it did —
ordered per resource by (index, seq) in a window partitioned by resource, so each
resource's story is read in one task and resources spread over the executors.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from coord.audit.checks.common import cite, cite_row, cited, resource, violations

GRANTS = ("owner.grant", "owner.reset")
ENDS = ("session.released", "session.expired", "session.severed")


def _owner_rows(df: Any) -> Any:
    return df.filter(F.col("kind").startswith("owner."))


def _per_resource() -> Any:
    return Window.partitionBy("group", "resource").orderBy("index", "seq")


def single_owner(df: Any) -> Any:
    """A grant to S while P != S held the resource must sever P in the same entry;
    otherwise P and S both own it."""
    w = _per_resource()
    ev = (_owner_rows(df)
          .withColumn("prev_owner", F.lag("owner").over(w))
          .withColumn("prev_row", F.lag(cited()).over(w)))
    takeovers = ev.filter(F.col("kind").isin(*GRANTS) & (F.col("prev_owner") > 0)
                          & (F.col("prev_owner") != F.col("owner")))
    severed = (df.filter(F.col("kind") == "session.severed")
               .select(F.col("index").alias("s_index"), F.col("session").alias("s_session")))
    bad = takeovers.join(severed, (F.col("index") == F.col("s_index"))
                         & (F.col("prev_owner") == F.col("s_session")), "left_anti")
    return violations(
        bad, "ownership.single_owner", F.col("index"), F.col("revision"), resource(),
        F.concat(F.lit("granted to session "), F.col("owner"), F.lit(" at generation "),
                 F.col("generation"), F.lit(" while session "), F.col("prev_owner"),
                 F.lit(" still owned it and was not severed: two owners")),
        F.array(cite_row("prev_row"), cite()))


def owner_alive(df: Any) -> Any:
    """A grant to a session whose last lifecycle row (open or end) is an end."""
    life = (df.filter((F.col("kind") == "open_session") & F.col("ok")
                      | F.col("kind").isin(*ENDS) | F.col("kind").isin(*GRANTS))
            .filter(F.col("session").isNotNull()))
    w = (Window.partitionBy("session").orderBy("index", "seq")
         .rowsBetween(Window.unboundedPreceding, -1))
    state = F.when(F.col("kind") == "open_session", F.lit("open")).when(
        F.col("kind").isin(*ENDS), F.lit("ended"))
    lived = (life.withColumn("state", state)
             .withColumn("last_state", F.last("state", ignorenulls=True).over(w))
             .withColumn("last_row", F.last(F.when(state.isNotNull(), cited()),
                                             ignorenulls=True).over(w)))
    bad = lived.filter(F.col("kind").isin(*GRANTS) & (F.col("last_state") == "ended"))
    return violations(
        bad, "ownership.owner_alive", F.col("index"), F.col("revision"), resource(),
        F.concat(F.lit("granted to session "), F.col("session"),
                 F.lit(", which had already ended")),
        F.array(cite_row("last_row"), cite()))


def generations(df: Any) -> Any:
    """Each grant's generation exceeds every earlier one of its resource since the last
    reset (frees keep the last); a reset (generation 0 claimed) restarts at exactly 1."""
    reset = F.col("kind") == "owner.reset"
    # resets so far: a reset opens a new era, and generations are compared within one
    era = F.sum(F.when(reset, 1).otherwise(0)).over(
        _per_resource().rowsBetween(Window.unboundedPreceding, 0))
    w = (Window.partitionBy("group", "resource", "era").orderBy("index", "seq")
         .rowsBetween(Window.unboundedPreceding, -1))
    ev = (_owner_rows(df).withColumn("era", era)
          .withColumn("prev_max", F.max("generation").over(w))
          .withColumn("prev_row", F.last(cited()).over(w)))
    bad = ev.filter((reset & (F.col("generation") != 1))
                    | ((F.col("kind") == "owner.grant")
                       & (F.col("generation") <= F.col("prev_max"))))
    return violations(
        bad, "ownership.generations", F.col("index"), F.col("revision"), resource(),
        F.when(reset, F.concat(F.lit("reset to generation "), F.col("generation"),
                               F.lit(" instead of 1")))
        .otherwise(F.concat(F.lit("generation "), F.col("generation"),
                            F.lit(" granted after generation "), F.col("prev_max"),
                            F.lit(" (must strictly increase)"))),
        F.array(cite_row("prev_row"), cite()))


def fencing_tokens(df: Any) -> Any:
    """The token a grant hands out is (generation, revision): consecutive grants of a
    resource carry strictly increasing revisions, and a grant's revision is the one its
    command reported to the client."""
    grants = _owner_rows(df).filter(F.col("kind").isin(*GRANTS))
    w = Window.partitionBy("group", "resource").orderBy("index", "seq")
    ev = (grants.withColumn("prev_rev", F.lag("revision").over(w))
          .withColumn("prev_row", F.lag(cited()).over(w)))
    cmd = (df.filter(F.col("seq") == 0)
           .select(F.col("index").alias("c_index"), F.col("revision").alias("c_rev")))
    ev = ev.join(cmd, F.col("index") == F.col("c_index"), "left")
    backwards = F.col("revision") <= F.col("prev_rev")
    mismatch = F.col("c_rev").isNotNull() & (F.col("revision") != F.col("c_rev"))
    bad = ev.filter(backwards | mismatch)
    return violations(
        bad, "ownership.fencing_tokens", F.col("index"), F.col("revision"), resource(),
        F.when(backwards, F.concat(F.lit("grant at revision "), F.col("revision"),
                                   F.lit(" not after the previous grant's revision "),
                                   F.col("prev_rev")))
        .otherwise(F.concat(F.lit("grant recorded at revision "), F.col("revision"),
                            F.lit(" but its command reported revision "), F.col("c_rev"))),
        F.array(cite_row("prev_row"), cite()))
