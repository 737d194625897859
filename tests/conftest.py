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
