"""`coord bench raft`'s member and cluster: the RaftBench service runs its proposers in
the leader, refuses bad requests and followers, and the members are real processes
started through LocalCluster(member_command=...). Figures are not asserted."""

from __future__ import annotations

import grpc
import pytest

from coord.bench import raft_bench_pb2 as pb
from coord.bench import raft_bench_pb2_grpc as rpc
from coord.bench.raft import BenchCluster, measure_throughput
from coord.testing import LocalCluster

pytestmark = [pytest.mark.cluster]


def test_proposers_inside_the_leader_commit_and_bad_requests_are_refused():
    with BenchCluster(3) as cluster:
        assert all("coord.bench.raft_member" in cluster.command(n) for n in cluster.members)
        ports = {a.rsplit(":", 1)[1] for m in cluster.members.values()
                 for a in (m.listen, m.peer_listen)}
        assert not ports & {a.rsplit(":", 1)[1] for a in cluster.bench_listen.values()}
        rows = measure_throughput(cluster, [1, 4], 0.3)
        assert [r["concurrency"] for r in rows] == [1, 4]
        assert all(r["committed"] > 0 and r["p99_ms"] >= r["p50_ms"] > 0 for r in rows)
        leader = cluster.wait_for_leader()
        follower = next(n for n in cluster.members if n != leader)
        with grpc.insecure_channel(cluster.bench_listen[follower]) as channel:
            stub = rpc.RaftBenchStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.ProposeLoad(pb.ProposeLoadRequest(concurrency=5000, duration_ms=100),
                                 timeout=10)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError) as e:
                stub.ProposeLoad(pb.ProposeLoadRequest(concurrency=1, duration_ms=100),
                                 timeout=10)
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # not the leader


def test_a_member_command_runs_processes_only():
    with pytest.raises(ValueError, match="in_process"):
        LocalCluster(1, in_process=True, member_command=lambda name: ["true"])
