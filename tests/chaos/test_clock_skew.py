"""Members' wall clocks, skewed in a test build (coord.chaos.skewed_member): n1's clock
runs two hours ahead. Sessions ride out leadership moving to and from n1 (their
deadlines are the leader's monotonic clock), and so do PID leases (their lifetimes run
on the elapsed clock, coord/sm/elapsed.py, which counts leader time only within a term:
before it, the skewed leader expired a lease leased a moment earlier)."""

from __future__ import annotations

import sys
import time

import pytest

from coord.client import Client, CoordError
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster

SKEW_MS = 2 * 3600 * 1000


def _member_command(name: str) -> list[str]:
    skew = SKEW_MS if name == "n1" else 0
    return [sys.executable, "-m", "coord.chaos.skewed_member", "--skew-ms", str(skew)]


def _lead(cluster: LocalCluster, name: str) -> None:
    leader = cluster.wait_for_leader(30)
    if leader != name:
        with cluster.client(leader, timeout=15) as admin:
            admin.transfer_leader(name)
    deadline = time.monotonic() + 20
    while cluster.wait_for_leader(30) != name:
        assert time.monotonic() < deadline, f"{name} did not become leader"
        time.sleep(0.1)


@pytest.fixture
def skewed(tmp_path):
    """A fresh cluster per test: once a skewed leader stamped a command, the state
    machine's clock stays ahead (it never goes back), which changes what follows."""
    with LocalCluster(3, data_dir=tmp_path / "c",
                      member_command=_member_command) as cluster:
        cluster.wait_for_leader(30)
        client = Client(cluster.endpoints, timeout=5)
        try:
            yield cluster, client
        finally:
            client.close()


def test_a_pid_lease_lives_its_hour_whatever_the_leaders_clock(skewed):
    cluster, client = skewed
    _lead(cluster, "n2")
    lease = client.lease_pid("skew-topic", 0)
    assert client.lease_pid("skew-topic", 0, lease.pid).pid == lease.pid
    _lead(cluster, "n1")
    client.put("skew/advance", "n1's clock")  # the skewed leader stamps a command
    try:
        again = client.lease_pid("skew-topic", 0, lease.pid)
    except CoordError as e:
        pytest.fail(f"the lease leased a moment ago is gone: {e}")
    assert again.pid == lease.pid
    # answered in the skewed leader's wall time: its clock plus what is left of the hour
    assert SKEW_MS + 3_500_000 < again.expire_ms - time.time() * 1000 <= SKEW_MS + 3_600_000


def test_sessions_ride_out_a_skewed_leader_and_leases_then_run_on_its_clock(skewed):
    """A session (TTL 3 s, kept alive) outlives leadership moving to and from n1. The
    state machine's clock only moves forward, so after n1 led it runs two hours ahead
    for good, and a lease granted later under n2 is reported to expire an hour past
    *that* (its lifetime itself runs on the elapsed clock: an hour)."""
    cluster, client = skewed
    _lead(cluster, "n2")
    with client.session(ttl=3) as s:
        s.own("skew", "r0")
        for leader in ("n1", "n3", "n1"):
            _lead(cluster, leader)
            client.put("skew/tick", leader)
            time.sleep(1.0)
            assert not s.fenced.is_set()
        assert client.get_owner("skew", "r0").session_id == s.id
    _lead(cluster, "n2")
    lease = client.lease_pid("skew-topic", 1)
    left_ms = lease.expire_ms - time.time() * 1000
    assert SKEW_MS + 3_500_000 < left_ms <= SKEW_MS + 3_600_000
    assert client.lease_pid("skew-topic", 1, lease.pid).pid == lease.pid
