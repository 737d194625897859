"""Producer ids: every pid issued (blocks, new leases, new producers) comes from one
increasing sequence, so issues are disjoint and increasing across leaders; a pid is
never leased twice while live; a producer's (pid, epoch) only goes up, and a check of
an older epoch after a bump is fenced.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from coord.audit.checks.common import cite, cite_row, cited, commands, violations

ISSUING = ("allocate_pid_block", "lease_pid", "init_producer")


def _issues(df: Any) -> Any:
    """[pid, pid + size) for every command that issued pids."""
    return commands(df).filter(F.col("kind").isin(*ISSUING) & (F.col("size") > 0)
                               & F.col("pid").isNotNull())


def disjoint(df: Any) -> Any:
    """Ordered by index, each issue starts at or after the end of every earlier one.
    The running maximum is a window over the whole sequence, but over issue rows only
    (a few percent of the history) with two longs each."""
    w = Window.orderBy("index").rowsBetween(Window.unboundedPreceding, -1)
    ev = (_issues(df).withColumn("end", F.col("pid") + F.col("size"))
          .withColumn("prev_end", F.max("end").over(w))
          .withColumn("prev_row", F.last(cited()).over(w)))
    bad = ev.filter(F.col("pid") < F.col("prev_end"))
    return violations(
        bad, "pids.disjoint", F.col("index"), F.col("revision"),
        F.concat(F.lit("pid "), F.col("pid")),
        F.concat(F.col("kind"), F.lit(" issued ["), F.col("pid"), F.lit(", "), F.col("end"),
                 F.lit(") under leader "), F.coalesce(F.col("leader"), F.lit("?")),
                 F.lit(", overlapping pids already issued (up to "), F.col("prev_end"),
                 F.lit(")")),
        F.array(cite_row("prev_row"), cite()))


def lease_unique(df: Any) -> Any:
    """Two new leases of the same pid whose lifetimes overlap."""
    leases = commands(df).filter((F.col("kind") == "lease_pid") & (F.col("size") == 1))
    a, b = leases.alias("a"), leases.alias("b")
    pairs = a.join(b, (F.col("a.pid") == F.col("b.pid")) & (F.col("a.index") < F.col("b.index"))
                   & (F.col("b.time_ms") < F.col("a.expire_ms")))
    return violations(
        pairs, "pids.lease_unique", F.col("b.index"), F.col("b.revision"),
        F.concat(F.lit("pid "), F.col("b.pid")),
        F.concat(F.lit("pid "), F.col("b.pid"), F.lit(" leased again at t="),
                 F.col("b.time_ms"), F.lit(" while its lease from index "), F.col("a.index"),
                 F.lit(" was live until t="), F.col("a.expire_ms")),
        F.array(cite("a"), cite("b")))


def _per_producer() -> Any:
    return Window.partitionBy("topic").orderBy("index")


def producer_epochs(df: Any) -> Any:
    """Per producer key, each init gives the same pid at epoch + 1 or a greater pid at 0."""
    inits = commands(df).filter(F.col("kind") == "init_producer")
    w = _per_producer()
    ev = (inits.withColumn("prev_pid", F.lag("pid").over(w))
          .withColumn("prev_epoch", F.lag("epoch").over(w))
          .withColumn("prev_row", F.lag(cited()).over(w)))
    bumped = (F.col("pid") == F.col("prev_pid")) & (F.col("epoch") == F.col("prev_epoch") + 1)
    fresh = (F.col("pid") > F.col("prev_pid")) & (F.col("epoch") == 0)
    bad = ev.filter(F.col("prev_pid").isNotNull() & ~(bumped | fresh))
    return violations(
        bad, "producers.epochs", F.col("index"), F.col("revision"),
        F.concat(F.lit("producer "), F.col("topic")),
        F.concat(F.lit("init gave pid "), F.col("pid"), F.lit(" epoch "), F.col("epoch"),
                 F.lit(" after pid "), F.col("prev_pid"), F.lit(" epoch "), F.col("prev_epoch"),
                 F.lit(" (epochs only go up)")),
        F.array(cite_row("prev_row"), cite()))


def producer_fencing(df: Any) -> Any:
    """A check_producer that succeeded with a (pid, epoch) older than the producer's
    latest init before it: the bump did not fence the old epoch."""
    rows = commands(df).filter(F.col("kind").isin("init_producer", "check_producer"))
    w = _per_producer().rowsBetween(Window.unboundedPreceding, -1)
    is_init = F.col("kind") == "init_producer"
    ev = (rows.withColumn("cur_pid", F.last(F.when(is_init, F.col("pid")), True).over(w))
          .withColumn("cur_epoch", F.last(F.when(is_init, F.col("epoch")), True).over(w))
          .withColumn("cur_row", F.last(F.when(is_init, cited()), True).over(w)))
    older = (F.col("pid") < F.col("cur_pid")) | (
        (F.col("pid") == F.col("cur_pid")) & (F.col("epoch") < F.col("cur_epoch")))
    bad = ev.filter((F.col("kind") == "check_producer") & older)
    return violations(
        bad, "producers.fencing", F.col("index"), F.col("revision"),
        F.concat(F.lit("producer "), F.col("topic")),
        F.concat(F.lit("pid "), F.col("pid"), F.lit(" epoch "), F.col("epoch"),
                 F.lit(" accepted after the bump to pid "), F.col("cur_pid"), F.lit(" epoch "),
                 F.col("cur_epoch")),
        F.array(cite_row("cur_row"), cite()))
