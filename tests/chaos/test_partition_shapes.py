"""The nemesis's partition shapes on real member processes in network namespaces this
test makes and removes: each variant cuts the links it says (a peer connection over a
cut link fails, every other one connects), the cluster still commits writes (each shape
leaves a majority that can reach a leader), a heal restores every link, and the
namespaces are gone afterwards."""

from __future__ import annotations

import itertools
import socket
import subprocess

import pytest

from coord.chaos.nemesis import PARTITIONS, Nemesis, Schedule
from coord.chaos.netns import Network, available, in_netns
from coord.client import Client, CoordError
from coord.testing import LocalCluster
from tests.cut_off import wait_until

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(bool(available()), reason=available() or "ok")]

TAG = "cct33p"


def _reaches(net: Network, a: str, b: str) -> bool:
    """A TCP connection from a's namespace to b's peer port opens."""
    def connect() -> bool:
        try:
            socket.create_connection((net.addr[b], net.peer_port[b]), timeout=1).close()
        except OSError:
            return False
        return True
    return in_netns(net.ns[a], connect)


def _links(net: Network) -> set[tuple[str, str]]:
    return {(a, b) for a, b in itertools.permutations(net.ns, 2) if _reaches(net, a, b)}


def _pick(variant: str) -> float:
    """A pick the nemesis turns into `variant`."""
    return (PARTITIONS.index(variant) + 0.5) / len(PARTITIONS)


def _writes_commit(client: Client, key: str) -> bool:
    try:
        client.put(key, "v")
    except CoordError:
        return False
    return True


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory):
    net = Network(["n1", "n2", "n3"], tag=TAG).create()
    cluster = LocalCluster(3, data_dir=tmp_path_factory.mktemp("shapes"))
    try:
        net.attach(cluster)
        cluster.start(timeout=30)
        cluster.wait_for_leader(30)
        with Client(cluster.endpoints, timeout=3) as client:
            yield net, Nemesis(cluster, Schedule(), 0.0, network=net), client
    finally:
        cluster.stop()
        net.destroy()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert TAG not in listed


ALL = {(a, b) for a, b in itertools.permutations(("n1", "n2", "n3"), 2)}


def test_a_bridge_leaves_one_member_seeing_both_sides_which_do_not_see_each_other(
        partitioned):
    net, nemesis, client = partitioned
    described, variant = nemesis._partition(_pick("bridge"))
    try:
        assert variant == "bridge"
        ((x, y, one_way),) = net.cuts
        assert not one_way and described == f"{x}|{y}"
        (bridge,) = set(net.ns) - {x, y}
        assert _links(net) == ALL - {(x, y), (y, x)}
        assert {(bridge, x), (bridge, y), (x, bridge), (y, bridge)} <= _links(net)
        wait_until("a write commits across the bridge",
                   lambda: _writes_commit(client, "shapes/bridge"), timeout=30)
    finally:
        net.heal()
    assert _links(net) == ALL


def test_a_one_way_cut_drops_one_direction_only(partitioned):
    net, nemesis, client = partitioned
    described, variant = nemesis._partition(_pick("one-way"))
    try:
        assert variant == "one-way"
        ((a, b, one_way),) = net.cuts
        assert one_way and described == f"{a}->{b}"
        assert _links(net) == ALL - {(a, b)}
        wait_until("a write commits with one direction cut",
                   lambda: _writes_commit(client, "shapes/one-way"), timeout=30)
    finally:
        net.heal()
    assert _links(net) == ALL

