"""coord as an embedded etcd replacement for other projects' test rigs: in-process
clusters (coord.testing, in_process=True), the `coord_cluster` pytest fixture, and
`coord serve --etcd-only` for rigs in other languages. Start-up time is measured by
`coord bench startup`, not asserted here."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from coord.client.admin import AdminClient
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing import ClusterError, LocalCluster, cluster
from coord.testing.ports import free_port, free_ports
from tests.etcdtools import LineProcess, etcdctl

pytestmark = [pytest.mark.cluster]
T = 10.0


def put(endpoint: str, key: bytes, value: bytes) -> pb.PutResponse:
    with grpc.insecure_channel(endpoint) as ch:
        return stubs.KVStub(ch).Put(pb.PutRequest(key=key, value=value), timeout=T)


def get(endpoint: str, key: bytes) -> list[bytes]:
    with grpc.insecure_channel(endpoint) as ch:
        return [kv.value for kv in stubs.KVStub(ch).Range(pb.RangeRequest(key=key),
                                                           timeout=T).kvs]


def test_in_process_member_keeps_its_data_across_a_kill_and_cleans_up_after():
    with cluster(members=1, in_process=True) as c:
        root = c.root
        ep = c.etcd_endpoints[0]
        assert put(ep, b"k", b"v1").header.revision == 2  # the first write, as in etcd
        c.kill("n1")
        assert not c.members["n1"].running
        with pytest.raises(grpc.RpcError):
            put(ep, b"k", b"lost")
        c.start_member("n1")
        c.wait_for_leader()
        assert get(ep, b"k") == [b"v1"]
        assert put(ep, b"k", b"v2").header.revision == 3
        with pytest.raises(ClusterError, match="in_process=False"):
            c.pause("n1")
        assert root.exists()
    assert not root.exists()


def test_in_process_three_members_fail_over_when_the_leader_is_killed():
    with cluster(members=3, in_process=True) as c:
        leader = c.wait_for_leader()
        others = [n for n in c.members if n != leader]
        put(c.members[others[0]].listen, b"before", b"1")
        c.kill(leader)
        new = c.wait_for_leader(timeout=15, among=others)
        assert new != leader
        put(c.members[new].listen, b"after", b"2")
        c.start_member(leader)
        assert get(c.members[leader].listen, b"after") == [b"2"]  # caught up (linearizable)


def test_in_process_and_process_clusters_run_side_by_side():
    """An embedded cluster and a process cluster are independent (ports, data, ids)."""
    with cluster(members=1, in_process=True) as inner, LocalCluster(1) as outer:
        outer.wait_for_leader()
        put(inner.etcd_endpoints[0], b"where", b"inner")
        put(outer.etcd_endpoints[0], b"where", b"outer")
        assert get(inner.etcd_endpoints[0], b"where") == [b"inner"]
        assert get(outer.etcd_endpoints[0], b"where") == [b"outer"]


def test_coord_cluster_fixture_defaults_to_one_embedded_member(coord_cluster):
    assert [m.embedded is not None for m in coord_cluster.members.values()] == [True]
    assert put(coord_cluster.etcd_endpoints[0], b"f", b"1").header.revision == 2  # fresh


@pytest.mark.coord_cluster(members=3, in_process=False)
def test_coord_cluster_fixture_takes_its_shape_from_the_marker(coord_cluster):
    assert len(coord_cluster.members) == 3
    assert all(m.proc is not None for m in coord_cluster.members.values())
    coord_cluster.pause(coord_cluster.wait_for_leader())  # processes can be SIGSTOPped


def test_serve_etcd_only_is_a_throwaway_etcd_for_other_languages():
    endpoint = f"127.0.0.1:{free_port()}"
    proc = LineProcess([sys.executable, "-m", "coord", "serve", "--etcd-only", "--listen",
                        endpoint])
    try:
        line = proc.read_until(lambda s: "serving the etcd v3 API" in s, timeout=30)[-1]
        data = Path(re.search(r"\(data in (.+)\)", line).group(1))
        assert data.exists() and endpoint in line
        etcdctl(endpoint, "put", "rig/k", "v")
        assert etcdctl(endpoint, "get", "rig/k", "--print-value-only").stdout == "v\n"
        with AdminClient(endpoint, timeout=T) as admin, pytest.raises(grpc.RpcError) as e:
            admin.status()  # only the etcd API is served
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        proc.signal(signal.SIGTERM)
        assert proc.proc.wait(15) == 0
        assert not data.parent.exists()  # its temp data dir went with it
    finally:
        proc.stop()


def test_serve_without_etcd_only_names_what_is_missing():
    out = subprocess.run([sys.executable, "-m", "coord", "serve", "--name", "x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--data-dir, --listen, --peer-listen, --initial-cluster required" in out.stderr


def test_a_port_another_grpc_server_serves_is_a_start_up_error():
    """gRPC binds with SO_REUSEPORT by default: without an exclusive bind, a member starts
    on a taken port and the kernel hands it only some of the connections."""
    squatter = grpc.server(ThreadPoolExecutor(max_workers=1))  # default options
    port = squatter.add_insecure_port("127.0.0.1:0")
    squatter.start()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "coord", "serve", "--etcd-only", "--listen",
             f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30)
    finally:
        squatter.stop(None)
    assert out.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port} (--listen)" in out.stdout + out.stderr


def test_a_data_dir_of_another_member_is_a_start_up_error(tmp_path):
    """Starting `b` on `a`'s data dir must refuse with a one-line reason, not a traceback,
    and leave `a`'s files as they were."""
    data = tmp_path / "a"
    first = LineProcess([sys.executable, "-m", "coord", "serve", "--etcd-only", "--name",
                         "a", "--data-dir", str(data), "--listen", f"127.0.0.1:{free_port()}"])
    try:
        first.read_until(lambda s: "serving the etcd v3 API" in s, timeout=30)
    finally:
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(15) == 0
    before = {p.name: p.stat().st_size for p in data.iterdir()}
    out = subprocess.run(
        [sys.executable, "-m", "coord", "serve", "--etcd-only", "--name", "b",
         "--data-dir", str(data), "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "belongs to member 'a', not 'b'" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert {p.name: p.stat().st_size for p in data.iterdir()} == before


def test_free_ports_are_distinct_and_unbound():
    ports = free_ports(64)
    assert len(set(ports)) == 64
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_sole_voter_elects_itself_without_waiting_an_election_timeout():
    """With a 100 s election timeout, only the start-up campaign can elect it in time."""
    with cluster(members=1, in_process=True, election_ticks=2000, timeout=10) as c:
        assert c.status("n1").role == "leader"
