"""The lease calls under auth, the same sequence against coord and against real etcd
(Debian's etcd-server) side by side: a TimeToLive that lists a lease's keys needs a user
who may read every one, a keepalive needs what the revoke of its lease needs (write on
every key attached), a revoke needs that too. etcd 3.4.23, the one installed, predates
the TimeToLive check (3.4.26) and checks no keepalive (3.6 does): those answers are where
coord knowingly differs, the rest are compared."""

from __future__ import annotations

import grpc
import pytest

from coord.etcdpb import rpc_pb2 as pb
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster
from tests.cut_off import wait_until
from tests.etcdtools import require
from tests.server.etcd.test_etcd_auth import BAD_TOKEN, DENIED, NO_USER, Etcd, set_up_auth

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]

HELD_C, HELD_P, KEYLESS, UNKNOWN = 7001, 7002, 7003, 7999  # lease ids, the same on both


def answer(result) -> str:
    """A call's answer as one comparable line (remaining TTLs only as "live")."""
    if isinstance(result, tuple):
        return f"{result[0]} {result[1]}"
    if isinstance(result, pb.LeaseTimeToLiveResponse):
        left = "gone" if result.TTL == -1 else "live"
        return f"ok {left} keys={sorted(k.decode() for k in result.keys)}"
    if isinstance(result, pb.LeaseKeepAliveResponse):
        return f"ok {'live' if result.TTL > 0 else 'gone'}"
    return "ok"


def keepalive(member: Etcd, lease: int, token: str | None) -> str:
    """One keepalive on a stream of its own: its answer, or the status ending the stream."""
    call = member.lease.LeaseKeepAlive(
        iter([pb.LeaseKeepAliveRequest(ID=lease)]),
        metadata=(("token", token),) if token is not None else None, timeout=10)
    try:
        return answer(next(call))
    except StopIteration:
        return "no answer"
    except grpc.RpcError as e:
        return answer((e.code().name, e.details()))
    finally:
        call.cancel()


def transcript(endpoint: str) -> dict[str, str]:
    """The sequence against one server (auth set up by `set_up_auth`): what each step
    answered."""
    set_up_auth(endpoint)
    m = Etcd(endpoint)
    try:
        root, alice, bob = (m.login(u, f"{u}pw") for u in ("root", "alice", "bob"))
        for lease, key in ((HELD_C, b"c"), (HELD_P, b"p/k"), (KEYLESS, None)):
            m.call(m.lease.LeaseGrant, pb.LeaseGrantRequest(ID=lease, TTL=60), root)
            if key is not None:
                m.call(m.kv.Put, pb.PutRequest(key=key, value=b"v", lease=lease), root)

        def ttl(lease: int, token: str | None, keys: bool = True) -> str:
            return answer(m.call(m.lease.LeaseTimeToLive,
                                 pb.LeaseTimeToLiveRequest(ID=lease, keys=keys), token))

        def revoke(lease: int, token: str | None) -> str:
            return answer(m.call(m.lease.LeaseRevoke, pb.LeaseRevokeRequest(ID=lease), token))

        return {
            "ttl+keys c, alice (reads a..b, p/)": ttl(HELD_C, alice),
            "ttl+keys c, no user": ttl(HELD_C, None),
            "ttl+keys keyless, no user": ttl(KEYLESS, None),
            "ttl c without keys, alice": ttl(HELD_C, alice, keys=False),
            "ttl+keys p/k, alice": ttl(HELD_P, alice),
            "ttl+keys c, root": ttl(HELD_C, root),
            "ttl+keys unknown, alice": ttl(UNKNOWN, alice),
            "keepalive c, alice": keepalive(m, HELD_C, alice),
            "keepalive c, bob (no role)": keepalive(m, HELD_C, bob),
            "keepalive c, no user": keepalive(m, HELD_C, None),
            "keepalive c, a token nobody issued": keepalive(m, HELD_C, "nonsense"),
            "keepalive p/k, alice": keepalive(m, HELD_P, alice),
            "keepalive keyless, no user": keepalive(m, KEYLESS, None),
            "keepalive c, root": keepalive(m, HELD_C, root),
            "revoke c, alice": revoke(HELD_C, alice),
            "revoke c, no user": revoke(HELD_C, None),
            "revoke p/k, alice": revoke(HELD_P, alice),
        }
    finally:
        m.close()


COORD = {
    "ttl+keys c, alice (reads a..b, p/)": f"PERMISSION_DENIED {DENIED}",
    "ttl+keys c, no user": f"INVALID_ARGUMENT {NO_USER}",
    "ttl+keys keyless, no user": f"INVALID_ARGUMENT {NO_USER}",
    "ttl c without keys, alice": "ok live keys=[]",
    "ttl+keys p/k, alice": "ok live keys=['p/k']",
    "ttl+keys c, root": "ok live keys=['c']",
    "ttl+keys unknown, alice": "ok gone keys=[]",
    "keepalive c, alice": f"PERMISSION_DENIED {DENIED}",
    "keepalive c, bob (no role)": f"PERMISSION_DENIED {DENIED}",
    "keepalive c, no user": f"INVALID_ARGUMENT {NO_USER}",
    "keepalive c, a token nobody issued": f"UNAUTHENTICATED {BAD_TOKEN}",
    "keepalive p/k, alice": "ok live",
    "keepalive keyless, no user": "ok live",
    "keepalive c, root": "ok live",
    "revoke c, alice": f"PERMISSION_DENIED {DENIED}",
    "revoke c, no user": f"INVALID_ARGUMENT {NO_USER}",
    "revoke p/k, alice": "ok",
}
ETCD_3_4_23_UNCHECKED = {  # what etcd 3.4.23 serves that coord refuses
    "ttl+keys c, alice (reads a..b, p/)": "ok live keys=['c']",
    "ttl+keys c, no user": "ok live keys=['c']",
    "ttl+keys keyless, no user": "ok live keys=[]",
    "keepalive c, alice": "ok live",
    "keepalive c, bob (no role)": "ok live",
    "keepalive c, no user": "ok live",
    "keepalive c, a token nobody issued": "ok live",
}


def test_lease_calls_need_the_keys_attached_as_etcd_checks_them(tmp_path):
    require("etcd")
    with LocalCluster(1, data_dir=tmp_path / "c") as c:
        coord = transcript(c.etcd_endpoints[0])
    with EtcdCluster(1) as e:
        etcd = transcript(e.endpoints[0])
    assert coord == COORD
    assert etcd == COORD | ETCD_3_4_23_UNCHECKED


LAG_S = 1.5  # how late the follower hears the leader: under its election timeout


def test_a_follower_that_does_not_know_a_lease_checks_its_keepalive_once_caught_up(tmp_path):
    """Everything the leader sends a follower arrives LAG_S late (heartbeats too, within
    an election timeout of 3 to 6 s, so it keeps its leader): a keepalive there for a
    lease granted meanwhile is not forwarded to the leader, who renews by id alone,
    but waits for the follower to catch up (unanswered until then), then is checked."""
    with LocalCluster(3, data_dir=tmp_path / "c", partitionable=True, election_ticks=60) as c:
        set_up_auth(c.etcd_endpoints)
        leader = c.wait_for_leader()
        follower = next(n for n in c.members if n != leader)
        on_leader, on_follower = Etcd(c.members[leader].listen), Etcd(c.members[follower].listen)
        gate = c.members[follower].gate
        try:
            root = on_leader.login("root", "rootpw")
            alice = on_follower.login("alice", "alicepw")  # known there before the lag
            gate.delay_s = LAG_S
            on_leader.call(on_leader.lease.LeaseGrant,
                           pb.LeaseGrantRequest(ID=HELD_C, TTL=60), root)
            on_leader.call(on_leader.kv.Put,
                           pb.PutRequest(key=b"c", value=b"v", lease=HELD_C), root)
            assert keepalive(on_follower, HELD_C, alice) == "no answer"  # not renewed
            wait_until("the follower, caught up, refuses alice",
                       lambda: keepalive(on_follower, HELD_C, alice)
                       == f"PERMISSION_DENIED {DENIED}", 30)
        finally:
            gate.delay_s = 0.0
            on_leader.close()
            on_follower.close()
