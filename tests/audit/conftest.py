"""The audit's tests share the run's one SparkSession (tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(spark_session):
    return spark_session
