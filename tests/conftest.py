import pytest

from coord.testing import LocalCluster


@pytest.fixture
def cluster3(tmp_path):
    """A fresh 3-member cluster of real `coord serve` processes on 127.0.0.1."""
    c = LocalCluster(3, data_dir=tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        c.stop()


def _module_cluster(tmp_path_factory, name: str):
    c = LocalCluster(3, data_dir=tmp_path_factory.mktemp(name) / "cluster")
    try:
        c.start()
        c.wait_for_leader()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def etcd_cluster3(tmp_path_factory):
    """A 3-member cluster shared by one module's etcd-client tests (each test uses its
    own keys): starting clusters is what costs time on a 2-core machine."""
    yield from _module_cluster(tmp_path_factory, "etcd")


@pytest.fixture(scope="module")
def shared_cluster3(tmp_path_factory):
    """A 3-member cluster shared by one module's tests that break nothing (each uses its
    own keys)."""
    yield from _module_cluster(tmp_path_factory, "shared")
