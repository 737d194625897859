"""`coord bench raft` on a cluster of plain `coord serve` processes, through the public
client only: each level of clients commits puts the cluster then holds, and a kill -9
of the leader is followed by a timed write on the survivors. Figures are not asserted."""

from __future__ import annotations

import pytest

from coord.bench.raft import VALUE, measure_failover, measure_throughput
from coord.client import Client
from coord.testing import LocalCluster

pytestmark = [pytest.mark.cluster]


def test_puts_from_each_level_of_clients_commit_and_a_failover_is_timed():
    with LocalCluster(3) as cluster:
        rows = measure_throughput(cluster, [1, 4], 0.3)
        assert [r["concurrency"] for r in rows] == [1, 4]
        assert all(r["committed"] > 0 and r["p99_ms"] >= r["p50_ms"] > 0 for r in rows)
        with Client(cluster.endpoints) as client:
            assert client.get("bench/0/0").value == VALUE  # the puts are in the cluster
        assert len(measure_failover(cluster, 1)) == 1
