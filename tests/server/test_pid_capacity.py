"""`coord pid capacity N` on real processes: committed through whichever member leads,
the same ring on every member, refused below the live leases, and kept across a kill -9
of every member."""

from __future__ import annotations

import json
import time

import pytest

from coord.cli import main as cli
from coord.client import Client
from coord.client.errors import CoordError
from coord.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.cluster


def capacities(cluster: LocalCluster, want: int, timeout: float = 15.0) -> dict[str, int]:
    """Every member's ring capacity, once all report `want` (or the deadline passes)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {n: json.loads(cluster.status(n).state_machine)["pid_capacity"]
                for n in cluster.members}
        if set(seen.values()) == {want} or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def test_the_pid_capacity_is_a_committed_cluster_setting(tmp_path, capsys):
    with LocalCluster(3, data_dir=tmp_path) as cluster:
        leader = cluster.wait_for_leader()
        followers_first = [cluster.members[n].listen for n in cluster.members if n != leader]
        endpoints = ",".join([*followers_first, cluster.members[leader].listen])
        assert cli.main(["pid", "capacity", "3", "--endpoints", endpoints]) == 0
        assert "pid capacity 3" in capsys.readouterr().out
        assert capacities(cluster, 3) == {n: 3 for n in cluster.members}

        with Client(cluster.endpoints) as client:
            for _ in range(3):
                client.lease_pid("orders", 0)
            with pytest.raises(CoordError) as full:
                client.lease_pid("orders", 0)
            assert full.value.reason == "PID_CAPACITY_EXHAUSTED"

            assert cli.main(["pid", "capacity", "2", "--endpoints", endpoints]) == 1
            err = capsys.readouterr().err
            assert "INVALID_ARGUMENT" in err and "3 pid leases are live" in err
            assert capacities(cluster, 3) == {n: 3 for n in cluster.members}

            assert cli.main(["pid", "capacity", "5", "--endpoints", endpoints,
                             "--json"]) == 0
            assert json.loads(capsys.readouterr().out)["capacity"] == 5
            assert client.lease_pid("orders", 0).pid == 4

        cluster.restart_all()
        assert capacities(cluster, 5) == {n: 5 for n in cluster.members}
