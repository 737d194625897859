"""Session (lease) revisions over the wire, on one in-process member: a grant and a
revoke of a lease without keys answer the current revision and leave it there, as
etcd's do, and a session that ended holding nothing still tells its event stream, at
that revision (`tests/sm/test_session_revisions.py` has the state machine's rule)."""

from __future__ import annotations

import time

import grpc
import pytest

from coord.client import Client
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs

pytestmark = [pytest.mark.cluster]
T = 10.0


def test_lease_grant_and_revoke_without_keys_leave_the_revision(coord_cluster):
    with grpc.insecure_channel(coord_cluster.etcd_endpoints[0]) as ch:
        kv, lease = stubs.KVStub(ch), stubs.LeaseStub(ch)
        rev = kv.Put(pb.PutRequest(key=b"k", value=b"v"), timeout=T).header.revision
        granted = lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30), timeout=T)
        assert granted.header.revision == rev
        revoked = lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=granted.ID), timeout=T)
        assert revoked.header.revision == rev
        with_key = lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30), timeout=T).ID
        put = kv.Put(pb.PutRequest(key=b"leased", lease=with_key), timeout=T)
        assert put.header.revision == rev + 1
        revoked = lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=with_key), timeout=T)
        assert revoked.header.revision == rev + 2  # its key deleted: one change
        assert kv.Range(pb.RangeRequest(key=b"leased"), timeout=T).count == 0


def test_a_session_that_held_nothing_still_tells_its_stream_it_ended(coord_cluster):
    hub = next(iter(coord_cluster.members.values())).embedded.member.hub
    with Client(coord_cluster.endpoints) as client:
        rev = client.put(b"k", b"v").header.revision
        session = client.session(ttl=30)
        # The stream must be listening before the session ends (else it is told "gone").
        deadline = time.monotonic() + T
        while not hub._sessions and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hub._sessions, "the session's event stream never subscribed"
        assert client.close_session(session.id).revision == rev  # closed by someone else
        first = next(session.events(timeout=T), None)
        assert first is not None
        assert (first.type, first.session_id, first.revision) == ("released", session.id, rev)
        assert session.fenced.wait(T) and session.ended == first  # the reason, not "gone"
        assert client.range(b"k").header.revision == rev
