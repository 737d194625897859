import os
import shutil
import sys

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


def _module_cluster(tmp_path_factory, name: str, members: int = 3, **kwargs):
    c = LocalCluster(members, data_dir=tmp_path_factory.mktemp(name) / "cluster", **kwargs)
    try:
        c.start()
        c.wait_for_leader()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """A CA, its members' and clients' certificates, and a stranger's CA (tests/pki.py)."""
    from tests.pki import PKI

    return PKI.make(tmp_path_factory.mktemp("pki"))


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


@pytest.fixture(scope="module")
def metrics_cluster3(tmp_path_factory):
    """A 3-member cluster serving /metrics and the health checks (`metrics_url` of each
    member), shared by one module's tests that break nothing."""
    yield from _module_cluster(tmp_path_factory, "metrics", metrics=True)


@pytest.fixture(scope="module")
def tls_member(tmp_path_factory):
    """One `coord serve` process over TLS with client certificates required on both ports
    (`.client_tls` is its clients'), shared by one module's tests of a client's TLS."""
    yield from _module_cluster(tmp_path_factory, "tls", members=1, tls=True)


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
def spark_session():
    """The one SparkSession of the run, for the audit's and the Spark writer's tests
    (Spark keeps one session per process: whichever asked first would set it up for
    both, so it is set up here for what each needs). local[2,4]: 2 cores, a task may
    fail 3 times; Python workers run this interpreter (they import coord); one shuffle
    partition and no adaptive planning, since on a few thousand rows tasks and
    re-planning cost more than the work they would split. The JDBC drivers installed
    (coord.testing.jdbc) are on its class path, for Spark's own df.write.jdbc."""
    require_java()
    from coord.audit.spark import session
    from coord.testing.jdbc import jars_conf

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = session("local[2,4]", "coord-tests", shuffle_partitions=1, progress=False, conf={
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
        "spark.pyspark.python": sys.executable,
        **jars_conf(),
    })
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def postgres():
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
