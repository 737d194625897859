"""Auto-compaction on real `coord serve` processes: the leader proposes, every member
forgets the same history, reads at retained revisions still work, and watches (native,
etcd, WatchOwners) starting below the compacted revision get `compacted`."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest

from coord.client import Client
from coord.client.errors import CompactedError
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster


def machine_state(cluster: LocalCluster, name: str) -> dict:
    return json.loads(cluster.status(name).state_machine)


def wait_compacted(cluster: LocalCluster, at_least: int, limit_s: float) -> dict[str, int]:
    """Every member's compact revision, once all of them reached `at_least`."""
    deadline = time.monotonic() + limit_s
    seen: dict[str, int] = {}
    while time.monotonic() < deadline:
        seen = {n: machine_state(cluster, n)["compact_revision"] for n in cluster.members}
        if min(seen.values()) >= at_least:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"compact revisions {seen} did not reach {at_least} in {limit_s}s")


def first(stream, limit_s: float = 10.0):
    """The first item of a client stream, or its error; cancelled after `limit_s`."""
    timer = threading.Timer(limit_s, stream.cancel)
    timer.start()
    try:
        for item in stream:
            return item
    finally:
        timer.cancel()
        stream.cancel()
    raise AssertionError(f"stream ended without an item within {limit_s}s")


def etcd_watch_from(endpoint: str, revision: int) -> pb.WatchResponse:
    """The response after `created` for an etcd watch of every key from `revision`."""
    with grpc.insecure_channel(endpoint) as ch:
        req = pb.WatchRequest(create_request=pb.WatchCreateRequest(
            key=b"\0", range_end=b"\0", start_revision=revision))
        responses = stubs.WatchStub(ch).Watch(iter([req]), timeout=10)
        try:
            created = next(responses)
            assert created.created
            return next(responses)
        finally:
            responses.cancel()


def test_revision_mode_compacts_every_member_alike(tmp_path):
    retention = 20
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=[
            "--auto-compaction-mode", "revision",
            "--auto-compaction-retention", str(retention)]) as cluster:
        cluster.wait_for_leader()
        with Client(cluster.endpoints) as c:
            session = c.session(name="router", ttl=30)
            first_owned = session.own("routes", [("p0", 1)]).header.revision
            revs = [c.put(b"hot", str(i).encode()).header.revision for i in range(80)]
            head = revs[-1]
            # the leader compacts to head - retention once a tenth of it has gone by
            compacted = wait_compacted(cluster, head - retention - retention // 10, 15.0)
            assert len(set(compacted.values())) == 1, f"members disagree: {compacted}"
            cut = next(iter(compacted.values()))
            assert cut <= head - retention, "history within the retention was compacted"
            for name, m in cluster.members.items():
                with Client([m.listen]) as one:
                    kv = one.get(b"hot", revision=head - retention, serializable=True)
                    assert kv is not None and kv.value == str(79 - retention).encode(), name
            with pytest.raises(CompactedError) as err:
                first(c.watch(b"hot", from_revision=revs[0]))
            assert err.value.compact_revision == cut
            assert first(c.watch(b"hot", from_revision=cut + 1)).kv.mod_revision == cut + 1
            with pytest.raises(CompactedError):
                first(c.watch_owners("routes", from_revision=first_owned))
            r = etcd_watch_from(cluster.endpoints[1], revs[0])
            assert r.canceled and r.compact_revision == cut
            session.close()


def test_periodic_mode_compacts_what_is_older_than_the_retention(tmp_path):
    with LocalCluster(1, data_dir=tmp_path / "c", extra_args=[
            "--auto-compaction-retention", "2s"]) as cluster:
        cluster.wait_for_leader()
        with Client(cluster.endpoints) as c:
            old = c.put(b"k", b"old").header.revision
            started = time.monotonic()
            wait_compacted(cluster, old, 10.0)
            assert time.monotonic() - started >= 1.0, "compacted before its retention"
            new = c.put(b"k", b"new").header.revision
            assert machine_state(cluster, "n1")["compact_revision"] < new
            assert c.get(b"k", revision=new).value == b"new"
