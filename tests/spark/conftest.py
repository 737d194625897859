"""The run's one SparkSession (tests/conftest.py, starting Spark costs seconds on this
machine) with coord-fenced registered, and one 3-member coord cluster of real processes
per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coord.testing import LocalCluster


@pytest.fixture(scope="session")
def spark(spark_session) -> Iterator[object]:
    """The run's SparkSession (tests/conftest.py) with coord-fenced and the tests'
    faulty and held sources registered."""
    from pyspark import cloudpickle

    from coord.spark import register
    from tests.spark import faults

    register(spark_session)
    cloudpickle.register_pickle_by_value(faults)  # workers need not import tests/
    spark_session.dataSource.register(faults.FaultySource)
    spark_session.dataSource.register(faults.HeldSource)
    yield spark_session


@pytest.fixture(scope="module")
def coord3(etcd_cluster3: LocalCluster) -> LocalCluster:
    """The module's 3-member cluster of real processes (tests/conftest.py's; its tests
    use their own job names)."""
    return etcd_cluster3
