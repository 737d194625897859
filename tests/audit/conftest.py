"""One SparkSession (local[2]) for every Spark test of the run: a JVM start costs more
than any of these small audits."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from coord.audit.spark import session

    # One shuffle partition and no adaptive planning: on a few thousand rows, tasks and
    # re-planning cost more than the work they would split.
    s = session("local[2]", "coord-audit-tests", shuffle_partitions=1, progress=False,
                conf={"spark.sql.adaptive.enabled": "false"})
    try:
        yield s
    finally:
        s.stop()
