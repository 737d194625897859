"""The run's one SparkSession (tests/conftest.py, starting Spark costs seconds on this
machine) with coord-fenced registered, one 3-member coord cluster of real processes
per module, and one real PostgreSQL server for the run."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A real PostgreSQL server (coord.testing.peer_postgres) for the run, on a free
    loopback port, stopped and removed at the end; each test uses tables of its own.
    Missing binaries skip the test, or fail it under CI (CI=true), where `make venv`
    installs them (`make database-servers`)."""
    from coord.testing.peer_postgres import PostgresMissing, PostgresServer

    try:
        server = PostgresServer()
    except PostgresMissing as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(e))
        pytest.skip(str(e))
    with server:
        yield server
