"""etcd's users, roles and permissions on real `coord serve` processes, driven by etcd's
own etcdctl and by plain gRPC calls: a user without a permission is refused, one with it
is served, a revoked permission holds from the next call, tokens work on every member
and expire, a verified client certificate names the user of a call without a token, and
auth survives a leader kill and a restart from snapshots."""

from __future__ import annotations

import queue
import time
from collections.abc import Sequence

import grpc
import pytest

from coord.client import Client
from coord.etcdpb import auth_pb2
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing import LocalCluster
from coord.tls.credentials import channel, channel_credentials
from coord.tls.files import TLS
from tests.cut_off import wait_until
from tests.etcdtools import etcdctl, require_etcdctl

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]

P = auth_pb2.Permission
DENIED = "etcdserver: permission denied"
NO_USER = "etcdserver: user name is empty"
BAD_TOKEN = "etcdserver: invalid auth token"


def fails(proc, message: str) -> bool:
    return proc.returncode != 0 and f"Error: {message}" in proc.stderr


def set_up_auth(eps: list[str] | str, *flags: str) -> None:
    """etcdctl's way (with `flags`: its TLS flags): root, a reader of a..b and of prefix
    p/, auth on."""
    for args in (("user", "add", "root:rootpw"), ("role", "add", "root"),
                 ("user", "grant-role", "root", "root"), ("user", "add", "alice:alicepw"),
                 ("user", "add", "bob:bobpw"), ("role", "add", "reader"),
                 ("role", "grant-permission", "reader", "read", "a", "b"),
                 ("role", "grant-permission", "reader", "--prefix=true", "readwrite", "p/"),
                 ("user", "grant-role", "alice", "reader"), ("auth", "enable")):
        etcdctl(eps, *flags, *args)


@pytest.fixture
def eps(etcd_cluster3):
    """The module's cluster, its auth state reset after each test (auth is cluster-wide)."""
    require_etcdctl()
    yield etcd_cluster3.etcd_endpoints
    member = Etcd(etcd_cluster3.etcd_endpoints[0])
    try:
        token = None
        if member.call(member.auth.UserGet, pb.AuthUserGetRequest(name="root")) == \
                ("INVALID_ARGUMENT", NO_USER):  # auth is on
            token = member.login("root", "rootpw")
            member.call(member.auth.AuthDisable, pb.AuthDisableRequest(), token)
        for name in member.auth.UserList(pb.AuthUserListRequest(), timeout=10).users:
            member.auth.UserDelete(pb.AuthUserDeleteRequest(name=name), timeout=10)
        for role in member.auth.RoleList(pb.AuthRoleListRequest(), timeout=10).roles:
            member.auth.RoleDelete(pb.AuthRoleDeleteRequest(role=role), timeout=10)
    finally:
        member.close()


class Etcd:
    """Plain gRPC calls to one member, with or without a token."""

    def __init__(self, endpoint: str, tls: TLS | None = None) -> None:
        self.channel = channel(endpoint, channel_credentials(tls) if tls else None)
        self.auth = stubs.AuthStub(self.channel)
        self.kv = stubs.KVStub(self.channel)
        self.watch = stubs.WatchStub(self.channel)
        self.lease = stubs.LeaseStub(self.channel)
        self.maintenance = stubs.MaintenanceStub(self.channel)

    def login(self, name: str, password: str) -> str:
        return self.auth.Authenticate(pb.AuthenticateRequest(name=name, password=password),
                                      timeout=10).token

    def call(self, method, request, token: str | None = None,
             metadata: Sequence[tuple[str, str]] = ()):
        """The response, or (code name, message)."""
        sent = (*((("token", token),) if token is not None else ()), *metadata)
        try:
            return method(request, timeout=10, metadata=sent or None)
        except grpc.RpcError as e:
            return (e.code().name, e.details())

    def watch_create(self, request: pb.WatchCreateRequest, token: str) -> pb.WatchResponse:
        """The first answer to a watch create (bounded by the call's deadline)."""
        requests: queue.Queue = queue.Queue()
        requests.put(pb.WatchRequest(create_request=request))
        call = self.watch.Watch(iter(requests.get, None), metadata=(("token", token),),
                                timeout=10)
        try:
            return next(call)
        finally:
            call.cancel()

    def close(self) -> None:
        self.channel.close()


def test_etcdctl_users_roles_and_a_permission_revoked_on_the_next_call(eps):
    set_up_auth(eps)
    alice, bob, root = ("--user", "alice:alicepw"), ("--user", "bob:bobpw"), \
        ("--user", "root:rootpw")
    assert fails(etcdctl(eps, "put", "a", "1", check=False), NO_USER)
    etcdctl(eps, *root, "put", "a", "1")
    etcdctl(eps, *root, "put", "c", "3")
    assert etcdctl(eps, *alice, "get", "a").stdout.split() == ["a", "1"]  # served
    assert fails(etcdctl(eps, *bob, "get", "a", check=False), DENIED)  # no permission
    assert fails(etcdctl(eps, *alice, "get", "c", check=False), DENIED)  # outside a..b
    assert fails(etcdctl(eps, *alice, "put", "a", "2", check=False), DENIED)  # read only
    assert etcdctl(eps, *alice, "get", "a", "--prefix").stdout.split() == ["a", "1"]  # [a, b)
    assert fails(etcdctl(eps, *alice, "get", "a", "--from-key", check=False), DENIED)
    etcdctl(eps, *alice, "put", "p/1", "x")
    assert etcdctl(eps, *alice, "get", "p/", "--prefix").stdout.split() == ["p/1", "x"]
    assert fails(etcdctl(eps, "--user", "alice:wrong", "get", "a", check=False),
                 "etcdserver: authentication failed, invalid user ID or password")
    assert fails(etcdctl(eps, *alice, "user", "list", check=False), DENIED)
    assert "Roles: reader" in etcdctl(eps, *alice, "user", "get", "alice").stdout  # its own
    etcdctl(eps, *root, "role", "revoke-permission", "reader", "a", "b")
    assert fails(etcdctl(eps, *alice, "get", "a", check=False), DENIED)  # the next call
    etcdctl(eps, *root, "role", "grant-permission", "reader", "read", "a")
    etcdctl(eps, *root, "user", "grant-role", "bob", "reader")
    assert etcdctl(eps, *bob, "get", "a").stdout.split() == ["a", "1"]
    etcdctl(eps, *root, "user", "revoke-role", "bob", "reader")
    assert fails(etcdctl(eps, *bob, "get", "a", check=False), DENIED)
    assert fails(etcdctl(eps, *root, "user", "delete", "root", check=False),
                 "etcdserver: invalid auth management")
    etcdctl(eps, *root, "auth", "disable")
    assert etcdctl(eps, "get", "c").stdout.split() == ["c", "3"]
    etcdctl(eps, *root, "auth", "enable")  # the fixture turns it off again
    # the audit trail: who changed what, never a password (exporting it needs a grant)
    with Client(eps, user="root", password="rootpw") as client:
        rows = [r for page in client.export_history() for r in page.rows if r["seq"] == 0]
    said = {(r["kind"], r.get("actor"), r.get("user"), r.get("role"), r.get("perm"),
             r.get("key"), r.get("range_end")) for r in rows if r["ok"]}
    assert {("role_grant_permission", None, None, "reader", "READ", "a", "b"),
            ("auth_enable", None, None, None, None, None, None),
            ("authenticate", None, "alice", None, None, None, None),
            ("put", "root", None, None, None, "a", None),
            ("role_revoke_permission", "root", None, "reader", None, "a", "b"),
            ("user_revoke_role", "root", "bob", "reader", None, None, None),
            ("auth_disable", "root", None, None, None, None, None)} <= said
    assert not any("alicepw" in repr(r) or "scrypt" in repr(r) for r in rows)


def test_every_check_on_the_wire(eps):
    """Txn compares and both branches, watch creation, lease revoke, maintenance and the
    token itself, with etcd's codes and messages, each call to a different member."""
    e = [Etcd(ep) for ep in eps]
    try:
        assert e[0].call(e[0].auth.AuthEnable, pb.AuthEnableRequest()) == \
            ("FAILED_PRECONDITION", "etcdserver: root user does not exist")
        set_up_auth(eps[0])
        root = e[0].login("root", "rootpw")
        alice = e[1].login("alice", "alicepw")
        for m in e:  # a token works on every member: the login committed its digest
            assert m.call(m.kv.Range, pb.RangeRequest(key=b"a"), alice).header.revision
        kv = e[2].kv
        assert e[2].call(kv.Range, pb.RangeRequest(key=b"a"), "nonsense") == \
            ("UNAUTHENTICATED", BAD_TOKEN)
        assert e[2].call(kv.Range, pb.RangeRequest(key=b"a")) == ("INVALID_ARGUMENT", NO_USER)
        lease = e[0].call(e[0].lease.LeaseGrant, pb.LeaseGrantRequest(TTL=60), root).ID
        e[0].call(e[0].kv.Put, pb.PutRequest(key=b"c", value=b"held", lease=lease), root)

        def txn(compare=(), success=(), failure=()):
            return e[2].call(kv.Txn, pb.TxnRequest(compare=list(compare), success=list(success),
                                                   failure=list(failure)), alice)

        put_p = pb.RequestOp(request_put=pb.PutRequest(key=b"p/2", value=b"v"))
        put_c = pb.RequestOp(request_put=pb.PutRequest(key=b"c", value=b"v"))
        read_a = pb.RequestOp(request_range=pb.RangeRequest(key=b"a"))
        cmp_c = pb.Compare(key=b"c", target=pb.Compare.VERSION, version=0)
        cmp_a = pb.Compare(key=b"a", target=pb.Compare.VERSION, version=0)
        denied = ("PERMISSION_DENIED", DENIED)
        assert txn([cmp_c], [put_p]) == denied  # a compare reads
        assert txn([cmp_a], [put_p], [put_c]) == denied  # the branch that would not run
        assert txn([], [pb.RequestOp(request_txn=pb.TxnRequest(success=[put_c]))]) == denied
        assert isinstance(txn([cmp_a], [put_p], [read_a]), pb.TxnResponse)  # all allowed
        assert e[1].call(e[1].lease.LeaseRevoke, pb.LeaseRevokeRequest(ID=lease), alice) \
            == denied  # key c is attached
        assert e[1].call(e[1].kv.Put, pb.PutRequest(key=b"p/3", lease=lease), alice) == denied
        refused = e[0].watch_create(pb.WatchCreateRequest(key=b"c"), alice)
        assert (refused.watch_id, refused.created, refused.canceled, refused.cancel_reason) \
            == (-1, True, True, f"rpc error: code = PermissionDenied desc = {DENIED}")
        assert e[0].watch_create(pb.WatchCreateRequest(key=b"p/", range_end=b"p0"),
                                 alice).created
        from_a = e[0].watch_create(pb.WatchCreateRequest(key=b"a", range_end=b"\0"), alice)
        assert from_a.canceled  # every key from a on: not only a (etcd 3.4 checks a only)
        assert e[1].call(e[1].maintenance.Hash, pb.HashRequest(), alice) == \
            ("UNKNOWN", "auth: permission denied")
        assert e[1].call(e[1].maintenance.Hash, pb.HashRequest(), root).hash
        assert e[1].call(e[1].maintenance.Status, pb.StatusRequest()).version
        assert e[2].call(e[2].auth.UserList, pb.AuthUserListRequest(), alice) == denied
        assert e[2].call(e[2].auth.RoleGet, pb.AuthRoleGetRequest(role="reader"),
                         alice).perm[0].key == b"a"  # a role it holds
        assert e[2].call(e[2].auth.Authenticate,
                         pb.AuthenticateRequest(name="alice", password="nope")) == \
            ("INVALID_ARGUMENT", "etcdserver: authentication failed, invalid user ID or password")
        e[0].call(e[0].auth.UserChangePassword,
                  pb.AuthUserChangePasswordRequest(name="alice", password="new"), root)
        for m in e:  # a password change ends the user's tokens on every member
            assert m.call(m.kv.Range, pb.RangeRequest(key=b"a"), alice) == \
                ("UNAUTHENTICATED", BAD_TOKEN)
    finally:
        for m in e:
            m.close()


def test_an_idle_token_expires_and_etcdctl_logs_in_again(tmp_path):
    """--auth-token-ttl 1: a token idle for longer is `invalid auth token`; etcdctl's
    lock holds its token idle while the command it runs sleeps, then unlocks, which
    its client retries after logging in again."""
    require_etcdctl()
    with LocalCluster(1, data_dir=tmp_path / "c", extra_args=["--auth-token-ttl", "1"]) as c:
        ep = c.etcd_endpoints[0]
        set_up_auth(ep)
        etcdctl(ep, "--user", "root:rootpw", "role", "grant-permission", "reader",
                "--prefix=true", "readwrite", "lock/")
        member = Etcd(ep)
        try:
            token = member.login("alice", "alicepw")
            assert member.call(member.kv.Range, pb.RangeRequest(key=b"a"), token).header
            time.sleep(1.5)  # idle past the TTL: what is under test, not a wait for a result
            assert member.call(member.kv.Range, pb.RangeRequest(key=b"a"), token) == \
                ("UNAUTHENTICATED", BAD_TOKEN)
            done = etcdctl(ep, "--user", "alice:alicepw", "lock", "lock/m", "sleep", "2.5",
                           timeout=60)
            assert done.returncode == 0
            fresh = member.login("root", "rootpw")
            left = member.call(member.kv.Range,
                               pb.RangeRequest(key=b"lock/", range_end=b"lock0"), fresh)
            assert left.count == 0  # the unlock after the expired token went through
        finally:
            member.close()


@pytest.mark.slow
def test_auth_survives_a_leader_kill_and_a_restart_from_snapshots(tmp_path):
    require_etcdctl()
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=["--snapshot-every", "20"]) as c:
        eps = c.etcd_endpoints
        set_up_auth(eps)
        alice, root = ("--user", "alice:alicepw"), ("--user", "root:rootpw")
        auth_index = max(s.commit_index for s in c.statuses().values())
        leader = c.wait_for_leader()
        c.kill(leader)
        left = [ep for n, ep in zip(c.members, eps, strict=True) if n != leader]
        c.wait_for_leader(among=[n for n in c.members if n != leader])
        assert fails(etcdctl(left, *alice, "put", "a", "1", check=False), DENIED)
        for i in range(60):  # enough entries for snapshots past the auth set-up
            etcdctl(left, *root, "put", f"k{i}", "v")
        c.start_member(leader)
        wait_until("every member's log compacted past the auth set-up",
                   lambda: all(s.first_index > auth_index for s in c.statuses().values())
                   and len(c.statuses()) == 3, 60)
        c.restart_all()
        c.wait_for_leader(timeout=20)
        assert etcdctl(eps, *alice, "get", "a").stdout == ""  # served: nothing there
        assert fails(etcdctl(eps, *alice, "put", "a", "1", check=False), DENIED)
        assert fails(etcdctl(eps, "get", "a", check=False), NO_USER)  # auth still on
        assert etcdctl(eps, *root, "get", "k59").stdout.split() == ["k59", "v"]


def tls_flags(tls: TLS) -> tuple[str, ...]:
    return ("--cacert", tls.cacert, "--cert", tls.cert, "--key", tls.key)


def test_a_verified_client_certificate_names_the_user_of_a_call_without_a_token(tmp_path):
    """--client-cert-auth with auth on, as etcd's: a call without a token is made as its
    certificate's common name (no password asked); a token, when sent, wins, a wrong
    one included; a call that says it came through etcd's grpc-gateway gets no user from
    the certificate."""
    require_etcdctl()
    with LocalCluster(1, data_dir=tmp_path / "c", tls=True) as c:
        ep = c.etcd_endpoints[0]
        root = tls_flags(c.client_tls)  # its common name is "root"
        alice_tls = c.issue_client("alice")
        alice, carol = tls_flags(alice_tls), tls_flags(c.issue_client("carol"))
        set_up_auth(ep, *root)
        etcdctl(ep, *root, "put", "a", "1")  # root by its certificate alone
        assert etcdctl(ep, *alice, "get", "a").stdout.split() == ["a", "1"]  # alice's read
        assert fails(etcdctl(ep, *alice, "put", "a", "2", check=False), DENIED)
        assert fails(etcdctl(ep, *alice, "user", "list", check=False), DENIED)
        assert fails(etcdctl(ep, *carol, "get", "a", check=False), DENIED)  # no such user
        member = Etcd(ep, alice_tls)
        try:
            root_token = member.login("root", "rootpw")
            put = pb.PutRequest(key=b"a", value=b"2")
            assert isinstance(member.call(member.kv.Put, put, root_token), pb.PutResponse)
            assert member.call(member.kv.Put, put, "nonsense") == ("UNAUTHENTICATED", BAD_TOKEN)
            assert member.call(member.kv.Range, pb.RangeRequest(key=b"a"), None,
                               [("grpcgateway-accept", "application/json")]) == \
                ("INVALID_ARGUMENT", NO_USER)
        finally:
            member.close()
