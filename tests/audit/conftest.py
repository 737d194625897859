"""One SparkSession (local[2]) for every Spark test of the run: a JVM start costs more
than any of these small audits."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from coord.audit.spark import session

    s = session("local[2]", "coord-audit-tests", shuffle_partitions=4, progress=False)
    try:
        yield s
    finally:
        s.stop()
