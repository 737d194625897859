"""A pytest plugin the runner loads into the upstream suite (`-p`): it points the suite
at the server under test, and stands in for the one part of the suite's own harness
that a newer Hypothesis lacks.

The suite finds its server the way its harness (pifpaf) set it up: `etcd3.client()` with
no address (localhost:2379) and `etcdctl`, which takes ETCDCTL_ENDPOINTS (the runner sets
it). Its PYTHON_ETCD_HTTP_URL reaches only some tests, and etcdctl refuses to run with
both it and ETCDCTL_ENDPOINTS set, so instead the address below becomes `etcd3.client`'s
default: no test talks to whatever else may listen on 2379 on a shared machine.

The suite's Hypothesis tests take a function-scoped fixture (one client for all
examples). The Hypothesis it pins (4.56.3) had no health check against that; later ones
fail such a test before it sends anything. The profile loaded here suppresses that one
check, and the suite's own profile (`deadline=None`, registered on import) inherits it."""

from __future__ import annotations

import functools
import os

import pytest

ENDPOINT_VARIABLE = "COORD_ETCD3_SUITE_ENDPOINT"


def pytest_configure(config: pytest.Config) -> None:
    import etcd3
    from hypothesis import HealthCheck, settings

    host, port = os.environ[ENDPOINT_VARIABLE].rsplit(":", 1)
    etcd3.client = functools.partial(etcd3.client, host=host, port=int(port))
    settings.register_profile(
        "etcd3-suite", suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    settings.load_profile("etcd3-suite")
