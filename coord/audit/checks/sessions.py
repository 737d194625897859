"""Session expiry, proposed by the leader alone, must respect the rules that keep a live
session alive: nothing expires while no quorum exists, and a session gets its full TTL
from when it opened, from when its leader took over (a new leader restarts every
deadline) and from when a quorum came back.

Times are the leaders' clocks as committed (`time_ms`), and quorum losses are the
members' `note_quorum_lost` records. A term begins at its first timed entry (its
note_leader, proposed at election), and its leader restarts the deadlines only later,
once it applied what it inherited: the check measures from the earlier time, so it can
only be looser than the leader was, never flag a legal expiry. `SLACK_MS` allows for
the deadlines running on the leader's monotonic clock while entries carry its wall clock.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from coord.audit.checks.common import cite, violations

SLACK_MS = 250


def _notes(df: Any) -> Any:
    return (df.filter((F.col("kind") == "note_quorum_lost") & F.col("ok"))
            .select(F.col("member").alias("n_member"), F.col("since_ms").alias("n_since"),
                    F.col("until_ms").alias("n_until"), F.col("mode").alias("n_mode"),
                    cite().alias("n_cite")))


def no_expiry_without_quorum(df: Any) -> Any:
    ex = df.filter(F.col("kind") == "session.expired")
    bad = ex.join(F.broadcast(_notes(df)), (F.col("time_ms") >= F.col("n_since"))
                  & (F.col("time_ms") <= F.col("n_until")))
    return violations(
        bad, "sessions.no_expiry_without_quorum", F.col("index"), F.col("revision"),
        F.concat(F.lit("session "), F.col("session")),
        F.concat(F.lit("expired at t="), F.col("time_ms"), F.lit(" while "), F.col("n_member"),
                 F.lit(" was "), F.col("n_mode"), F.lit(" without a quorum (t="),
                 F.col("n_since"), F.lit(".."), F.col("n_until"), F.lit(")")),
        F.array(F.col("n_cite"), cite()))


def ttl_respected(df: Any, slack_ms: int = SLACK_MS) -> Any:
    """An expiry earlier than a full TTL after the session opened, after its leader's
    term began, or after a quorum came back."""
    life = df.filter(((F.col("kind") == "open_session") & F.col("ok"))
                     | (F.col("kind") == "session.expired"))
    w = (Window.partitionBy("session").orderBy("index", "seq")
         .rowsBetween(Window.unboundedPreceding, 0))
    opened = F.when(F.col("kind") == "open_session", F.col("time_ms"))
    ex = (life.withColumn("opened_ms", F.last(opened, True).over(w))
          .withColumn("ttl", F.last("ttl_ms", True).over(w))
          .filter(F.col("kind") == "session.expired"))
    starts = (df.filter(~F.col("kind").isin("noop", "conf_change"))
              .groupBy(F.col("term").alias("t_term"))
              .agg(F.min("time_ms").alias("term_start_ms")))
    ex = ex.join(F.broadcast(starts), F.col("term") == F.col("t_term"), "left")
    # the latest time a quorum came back at or before each expiry
    back = (ex.select("index", "seq", "time_ms")
            .join(F.broadcast(_notes(df).select(F.col("n_until").alias("back_ms"))),
                  F.col("back_ms") <= F.col("time_ms"))
            .groupBy("index", "seq").agg(F.max("back_ms").alias("back_ms")))
    ex = ex.join(back, ["index", "seq"], "left")
    t, ttl = F.col("time_ms"), F.col("ttl")
    early_open = t < F.col("opened_ms") + ttl - slack_ms
    early_term = t < F.col("term_start_ms") + ttl - slack_ms
    early_back = t < F.col("back_ms") + ttl - slack_ms
    bad = ex.filter(ttl.isNotNull() & (early_open | early_term | early_back))
    since = (F.when(early_open, F.concat(F.lit("it opened at t="), F.col("opened_ms")))
             .when(early_term, F.concat(F.lit("term "), F.col("term"),
                                        F.lit("'s leader took over at t="),
                                        F.col("term_start_ms")))
             .otherwise(F.concat(F.lit("the quorum came back at t="), F.col("back_ms"))))
    return violations(
        bad, "sessions.ttl_respected", F.col("index"), F.col("revision"),
        F.concat(F.lit("session "), F.col("session")),
        F.concat(F.lit("expired at t="), t, F.lit(", less than its TTL of "), ttl,
                 F.lit(" ms after "), since),
        F.array(cite()))
