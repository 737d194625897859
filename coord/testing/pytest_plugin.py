"""pytest fixtures for projects that test against coord instead of an embedded etcd.
Installed with coord (a `pytest11` entry point), so any test can ask for them:

    def test_claims(coord_cluster):
        client = etcd3.client(*coord_cluster.etcd_endpoints[0].split(":"))

`coord_cluster` is a fresh cluster per test, handed over with a leader serving writes
and removed afterwards. By default one member in this process (ready in tens of ms);
`@pytest.mark.coord_cluster(members=3, in_process=False)` asks for another shape (any
coord.testing.cluster keyword), e.g. processes, to kill -9 or SIGSTOP members;
`@pytest.mark.coord_cluster(tls=True)` a cluster over TLS, whose clients use
`coord_cluster.client_tls`:

    @pytest.mark.coord_cluster(tls=True)
    def test_over_tls(coord_cluster):
        with Client(coord_cluster.endpoints, tls=coord_cluster.client_tls) as client: ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from coord.testing import LocalCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "coord_cluster(**kwargs): the shape of the coord_cluster fixture's cluster "
        "(members=1, in_process=True by default; any coord.testing.cluster keyword)")


@pytest.fixture
def coord_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    from coord.testing import cluster

    marker = request.node.get_closest_marker("coord_cluster")
    kwargs = {"members": 1, "in_process": True, **(marker.kwargs if marker else {})}
    with cluster(**kwargs) as c:
        yield c
