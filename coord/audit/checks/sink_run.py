"""A publish in coord's order of runs: what coord's history proves about when the driver
published, beyond the sink's order (`coord.audit.checks.sink`) and the partitions'
grants (`coord.audit.checks.sink_coord`).

Before it publishes, the driver reads its job's run slot linearizably
(`coord.spark.attempt.check_run`) and the sink logs, with every publish row, what that
read saw: `run` was the newest run of `run_job` at `checked_revision` of coord's state.
The export names the slot (`run_group`, `run_resource`), so the check finds the slot's
grants in coord's history and compares revisions, coord's own order: a newer run's
grant at or below the checked revision means the driver published as a run coord had
already superseded when it looked. A publish logged without a check (a writer without
runs, `checked_revision` null) is not judged. The driver's read is made inside the
sink's publish, under the sink's run lock that a driver starting a run holds
(`coord.spark.datasource.begin_run`), so no run is granted between the read and the
publish's commit: a grant above the checked revision came after the publish.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from coord.audit.checks.common import cite_row, cited, violations
from coord.audit.checks.ownership import GRANTS
from coord.audit.checks.sink import cite_log, subject


def run_slot_grants(history: Any, log: Any) -> Any:
    """coord's grants of the run slots the log's publishes checked: the slot (`g_group`,
    `g_resource`), the run (`g_generation`), coord's revision of it (`g_revision`) and
    the grant row (`grant_row`, a `common.cited` struct)."""
    slots = F.broadcast(log.filter(F.col("run_group").isNotNull())
                        .select(F.col("run_group").alias("group"),
                                F.col("run_resource").alias("resource")).distinct())
    return (history.filter(F.col("kind").isin(*GRANTS))
            .join(slots, ["group", "resource"], "left_semi")
            .select(F.col("group").alias("g_group"), F.col("resource").alias("g_resource"),
                    F.col("generation").alias("g_generation"),
                    F.col("revision").alias("g_revision"), cited().alias("grant_row")))


def publish_run_newest(log: Any, history: Any) -> Any:
    """Every checked publish of run R happened while R was its job's newest run, in
    coord's revision order: coord's history has the run slot's grant to R at or below
    the revision the driver's check read (`checked_revision`), and no grant of the slot
    to a newer run at or below it. Either failing is a violation, cited with the publish
    row and the grant that shows it (the first grant of the newest run granted by then,
    or none for a run never granted by then). A publish is known by its log `id`, which
    the sink's order makes unique.

    Linear in the runs: R's own grant by an equi-join on (slot, run), the newest run by
    then by one scan of each slot's grants and checks in revision order. Joining every
    publish with every earlier grant of its slot grows with the runs squared: a
    10M-row log's four jobs, three thousand runs each, made 220M joined rows."""
    pubs = log.filter((F.col("op") == "publish") & F.col("checked_revision").isNotNull())
    grants = run_slot_grants(history, log)
    in_slot = ((F.col("run_group") == F.col("g_group"))
               & (F.col("run_resource") == F.col("g_resource")))
    own = (pubs.select("id", "run_group", "run_resource", "run", "checked_revision")
           .join(grants, in_slot & (F.col("g_generation") == F.col("run"))
                 & (F.col("g_revision") <= F.col("checked_revision")))
           .groupBy("id").agg(F.max("grant_row").alias("own_grant")))
    # one scan per slot: grants and checks by revision, a grant before a check at the
    # same revision (granted at or below it); each check sees the highest run by then
    # the highest run first, then its earliest grant (a reset re-grants a run)
    marks = grants.filter(F.col("g_revision").isNotNull()).select(
        F.col("g_group").alias("slot_group"), F.col("g_resource").alias("slot_resource"),
        F.col("g_revision").alias("at"), F.lit(0).alias("order"),
        F.struct(F.col("g_generation").alias("run"), (-F.col("g_revision")).alias("first"),
                 F.col("g_revision").alias("revision"),
                 F.col("grant_row").alias("row")).alias("grant"))
    checks = pubs.select(
        F.col("run_group").alias("slot_group"), F.col("run_resource").alias("slot_resource"),
        F.col("checked_revision").alias("at"), F.lit(1).alias("order"), "id")
    by_then = (Window.partitionBy("slot_group", "slot_resource").orderBy("at", "order")
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    highest = (marks.unionByName(checks, allowMissingColumns=True)
               .withColumn("highest", F.max("grant").over(by_then))
               .filter(F.col("order") == 1).select("id", "highest"))
    seen = (pubs.join(own, "id", "left").join(highest, "id", "left")
            .withColumn("newer", F.when(F.col("highest.run") > F.col("run"),
                                        F.col("highest"))))
    bad = seen.filter(F.col("own_grant").isNull() | F.col("newer").isNotNull())
    slot = F.concat(F.col("run_group"), F.lit("/"), F.col("run_resource"))
    return violations(
        bad, "sink.publish_run_newest", F.col("id"), F.col("checked_revision"), subject(),
        F.concat(
            F.lit("the sink published run "), F.col("run"), F.lit(" after a check at "
                                                                  "revision "),
            F.col("checked_revision"), F.lit(", but "),
            F.when(F.col("newer").isNotNull(), F.concat(
                F.lit("coord's history had granted "), slot, F.lit(" to the newer run "),
                F.col("newer.run"), F.lit(" at revision "), F.col("newer.revision")))
            .otherwise(F.concat(F.lit("coord's history has no grant of "), slot,
                                F.lit(" to that run at or before it")))),
        F.array(cite_log(), F.when(F.col("newer").isNotNull(), cite_row("newer.row")),
                cite_row("own_grant")))
