"""One SparkSession for the whole run (starting Spark costs seconds on this machine) and
one 3-member coord cluster of real processes per module."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

from coord.testing import LocalCluster


def require_java() -> None:
    """A missing Java runtime skips the Spark tests, or fails them under CI (CI=true),
    where `make venv` installs one (`make java-runtime`)."""
    if shutil.which("java") is None:
        message = ("java is not installed: `make java-runtime` installs Debian's "
                   "default-jre-headless (as root)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    require_java()
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from coord.spark import register
    from tests.spark import faults

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers import coord from this venv
    session = (SparkSession.builder.master("local[2,4]")  # 2 cores, a task may fail 3 times
               .appName("coord-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
               .config("spark.pyspark.python", sys.executable)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    cloudpickle.register_pickle_by_value(faults)  # workers need not import tests/
    session.dataSource.register(faults.FaultySource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def coord3(etcd_cluster3: LocalCluster) -> LocalCluster:
    """The module's 3-member cluster of real processes (tests/conftest.py's; its tests
    use their own job names)."""
    return etcd_cluster3
