"""The native API under etcd's users and roles, on real `coord serve` processes: users and
roles made with `coord user`/`coord role`/`coord auth`, then the client library as a user
with a permission on an ownership group, a producer-id prefix, a KV prefix, its sessions
and an admin operation is served there and refused elsewhere with PERMISSION_DENIED
naming the permission; a revoked permission holds from the next call; auth survives a
leader kill. Own and release act for a session only for a user who may write its name.
A session's keepalives and event stream serve only a user who may write its
name (root included), a member-local session on a read-only member is checked as one
opened through the log, the Admin service's inspection reads need `admin` READ on
`inspect` and a history export `admin` READ on `history`."""

from __future__ import annotations

import contextlib
import io

import grpc
import pytest

from coord.cli.main import main as coord_cli
from coord.client import Client
from coord.client.admin import AdminClient, propose_to_leader
from coord.client.errors import CoordError
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as estubs
from coord.sm import commands as c
from coord.testing import LocalCluster
from coord.v1 import admin_pb2, admin_pb2_grpc, coord_pb2, coord_pb2_grpc
from tests.cut_off import mode_of, resume_paused, wait_until

pytestmark = [pytest.mark.cluster]

ROOT = ("--user", "root:rootpw")


def cli(eps: list[str], *args: str) -> str:
    """`coord ARGS --endpoints EPS` in this process: its output (SystemExit on a usage
    error; an error exit fails the test)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = coord_cli([*args, "--endpoints", ",".join(eps)])
    assert code == 0, err.getvalue()
    return out.getvalue()


def set_up_users(eps: list[str]) -> None:
    """root, alice whose role `pipeline` holds a grant of each kind (inspection
    included), and bob who may use sessions named bob-* only; auth on."""
    for args in (("user", "add", "root:rootpw"), ("role", "add", "root"),
                 ("user", "grant-role", "root", "root"), ("user", "add", "alice:alicepw"),
                 ("role", "add", "pipeline"), ("user", "grant-role", "alice", "pipeline"),
                 ("user", "add", "bob:bobpw"), ("role", "add", "sessions-only"),
                 ("user", "grant-role", "bob", "sessions-only"),
                 ("role", "grant-permission", "sessions-only", "write", "bob-", "--prefix",
                  "--kind", "session")):
        cli(eps, *args)
    for grant in (("readwrite", "orders/", "--prefix", "--kind", "group"),
                  ("readwrite", "tx-alice-", "--prefix", "--kind", "producer"),
                  ("readwrite", "a/", "--prefix"),
                  ("write", "alice-", "--prefix", "--kind", "session"),
                  ("write", "compact", "--kind", "admin"),
                  ("read", "inspect", "--kind", "admin")):
        cli(eps, "role", "grant-permission", "pipeline", *grant)
    cli(eps, "auth", "enable")


def users_cluster(tmp_path_factory, name: str, **options):
    """A 3-member cluster (LocalCluster `options`) with `set_up_users`' users and roles,
    auth on; stopped when the fixture ends."""
    cluster = LocalCluster(3, data_dir=tmp_path_factory.mktemp(name) / "cluster", **options)
    try:
        cluster.start()
        cluster.wait_for_leader()
        set_up_users(cluster.endpoints)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def authed(tmp_path_factory):
    """A 3-member cluster with `set_up_users`' users and roles, auth on."""
    yield from users_cluster(tmp_path_factory, "native-auth")


@pytest.fixture
def eps(authed):
    return authed.endpoints


def denied(fn) -> str:
    """The message of the PERMISSION_DENIED `fn()` raises."""
    with pytest.raises(CoordError) as e:
        fn()
    assert e.value.reason == "PERMISSION_DENIED", e.value
    return e.value.message


def test_a_group_permission_owns_there_and_is_refused_elsewhere_naming_it(eps):
    with Client(eps, user="alice", password="alicepw") as alice:
        s = alice.open_session("alice-owner", ttl=10)
        granted = alice.own(s.session_id, "orders/eu", ["p0", "p1"])
        assert [g.resource for g in granted.grants] == ["p0", "p1"]
        assert alice.get_owner("orders/eu", "p0").session_id == s.session_id
        assert denied(lambda: alice.own(s.session_id, "billing", ["p0"])) \
            == "user 'alice' lacks WRITE on group 'billing'"
        assert denied(lambda: alice.get_owner("billing", "p0")) \
            == "user 'alice' lacks READ on group 'billing'"
        assert denied(lambda: alice.open_session("bob-1", ttl=10)) \
            == "user 'alice' lacks WRITE on session 'bob-1'"


def test_a_group_grant_owns_and_releases_in_the_users_own_sessions_only(eps):
    """alice may write the group but not bob's session's name: she cannot own or
    release in his session's stead; a takeover in her own session is hers to make."""
    with Client(eps, user="bob", password="bobpw") as bob, \
            Client(eps, user="root", password="rootpw") as root, \
            Client(eps, user="alice", password="alicepw") as alice:
        his = bob.open_session("bob-held", ttl=30).session_id
        root.own(his, "orders/held", ["r0"])  # root may act for any session
        assert denied(lambda: alice.release(his, "orders/held", ["r0"])) \
            == "user 'alice' lacks WRITE on session 'bob-held'"
        assert denied(lambda: alice.own(his, "orders/held", ["r1"])) \
            == "user 'alice' lacks WRITE on session 'bob-held'"
        assert alice.get_owner("orders/held", "r0").session_id == his
        mine = alice.open_session("alice-takeover", ttl=30).session_id
        alice.own(mine, "orders/held", {"r0": 0})  # generation 0: a takeover
        assert alice.get_owner("orders/held", "r0").session_id == mine


def test_a_producer_prefix_a_kv_prefix_and_an_admin_call(eps):
    with Client(eps, user="alice:alicepw") as alice:
        first = alice.init_producer("tx-alice-1")
        assert alice.init_producer("tx-alice-1").generation == first.generation + 1
        assert denied(lambda: alice.init_producer("tx-bob-1")) \
            == "user 'alice' lacks WRITE on producer 'tx-bob-1'"
        alice.put("a/1", "v")
        assert alice.get("a/1").value == b"v"
        assert denied(lambda: alice.put("b/1", "v")) == "user 'alice' lacks WRITE on kv b'b/1'"
        assert denied(lambda: alice.get("b/1")) == "user 'alice' lacks READ on kv b'b/1'"
        alice.compact(alice.get("a/1").mod_revision)  # admin "compact" granted
    with Client(eps) as anonymous:
        assert denied(lambda: anonymous.put("a/2", "v")) \
            == "a caller without a user lacks WRITE on kv b'a/2'"
    cmd = c.SetPidCapacity(70_000, request_id="native-auth-capacity")
    result = c.decode_result(propose_to_leader(eps, c.encode_command(cmd), user="alice",
                                               password="alicepw"))
    assert result.error == "PERMISSION_DENIED", result
    assert result.message == "user 'alice' lacks WRITE on admin 'pid-capacity'"


def test_a_revoked_permission_holds_from_the_next_call(eps):
    with Client(eps, user="alice", password="alicepw") as alice:
        s = alice.open_session("alice-revoke", ttl=10)
        alice.own(s.session_id, "orders/us", ["r0"])
        cli(eps, "role", "revoke-permission", "pipeline", "orders/", "--prefix",
            "--kind", "group", *ROOT)
        try:
            assert denied(lambda: alice.own(s.session_id, "orders/us", ["r1"])) \
                == "user 'alice' lacks WRITE on group 'orders/us'"
        finally:
            cli(eps, "role", "grant-permission", "pipeline", "readwrite", "orders/",
                "--prefix", "--kind", "group", *ROOT)
        assert "group READWRITE [orders/, orders0)" in cli(eps, "role", "get", "pipeline",
                                                           *ROOT)


def test_auth_survives_a_leader_kill(authed, eps):
    cluster = authed
    leader = cluster.wait_for_leader()
    with Client(eps, user="alice", password="alicepw") as alice:
        s = alice.open_session("alice-kill", ttl=10)
        alice.own(s.session_id, "orders/kill", ["k0"])
        cluster.kill(leader)
        try:
            cluster.wait_for_leader(among=[n for n in cluster.members if n != leader])
            alice.own(s.session_id, "orders/kill", ["k1"])
            assert denied(lambda: alice.own(s.session_id, "billing", ["k0"])) \
                == "user 'alice' lacks WRITE on group 'billing'"
        finally:
            cluster.start_member(leader)


def test_membership_and_transfer_need_their_admin_permission(authed):
    leader = authed.wait_for_leader()
    other = next(name for name in authed.members if name != leader)
    for call in (lambda admin: admin.transfer_leader(other),
                 lambda admin: admin.remove_member(other)):
        with AdminClient(authed.members[leader].listen, timeout=10, user="alice",
                         password="alicepw") as admin:
            with pytest.raises(grpc.RpcError) as e:
                call(admin)
        assert e.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "user 'alice' lacks WRITE on admin '" in e.value.details()
    assert len(authed.statuses()) == 3  # nobody was removed


def test_watches_need_read_access(eps):
    with Client(eps, user="root", password="rootpw") as root:  # something to watch
        root.put("b/w", "1")
        root.own(root.open_session("root-w", ttl=30).session_id, "billing", ["w"])
    with Client(eps, user="alice", password="alicepw") as alice:
        # from a revision: no Range pins the start, the Watch itself is refused
        assert denied(lambda: next(iter(alice.watch(prefix="b/", from_revision=1)))) \
            == "user 'alice' lacks READ on kv b'b/' to b'b0'"
        assert denied(lambda: next(iter(alice.watch_owners("billing")))) \
            == "user 'alice' lacks READ on group 'billing'"


def test_a_client_logs_in_again_when_its_token_ends(eps):
    with Client(eps, user="alice", password="alicepw") as alice:
        alice.put("a/token", "1")
        token = alice._aio.login.token
        cli(eps, "auth", "disable", *ROOT)  # every token ends
        cli(eps, "auth", "enable")
        alice.put("a/token", "2")  # INVALID_AUTH_TOKEN, a new login, served
        assert alice._aio.login.token not in ("", token)
        assert alice.get("a/token").value == b"2"


def test_etcd_clients_see_etcds_permissions_only(eps):
    """etcdctl's `role get` lists the kv grant; coord's lists every kind."""
    from coord.etcdpb import rpc_pb2 as pb
    from coord.etcdpb import rpc_pb2_grpc as stubs

    with grpc.insecure_channel(eps[0]) as ch:
        auth = stubs.AuthStub(ch)
        token = auth.Authenticate(pb.AuthenticateRequest(name="root", password="rootpw"),
                                  timeout=10).token
        meta = (("token", token),)
        etcds = auth.RoleGet(pb.AuthRoleGetRequest(role="pipeline"), timeout=10, metadata=meta)
        every = auth.RoleGet(pb.AuthRoleGetRequest(role="pipeline", coord_kinds=True),
                             timeout=10, metadata=meta)
    assert [(p.key, p.coord_kind) for p in etcds.perm] == [(b"a/", "")]
    assert sorted(p.coord_kind for p in every.perm) \
        == ["", "admin", "admin", "group", "producer", "session"]


def token_of(endpoint: str, user: str, password: str) -> tuple[tuple[str, str], ...]:
    """The call metadata of a login as `user` on the member at `endpoint`."""
    from coord.etcdpb import rpc_pb2 as pb
    from coord.etcdpb import rpc_pb2_grpc as stubs

    with grpc.insecure_channel(endpoint) as ch:
        token = stubs.AuthStub(ch).Authenticate(
            pb.AuthenticateRequest(name=user, password=password), timeout=10).token
    return (("token", token),)


def rpc_denied(call) -> str:
    """The details of the PERMISSION_DENIED that `call()` fails with."""
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() is grpc.StatusCode.PERMISSION_DENIED, e.value
    return e.value.details()


def keepalive(channel: grpc.Channel, sid: int, metadata) -> coord_pb2.KeepAliveResponse:
    stream = coord_pb2_grpc.SessionsStub(channel).KeepAlive(
        iter([coord_pb2.KeepAliveRequest(session_id=sid)]), timeout=10, metadata=metadata)
    return next(iter(stream))


def first_event(channel: grpc.Channel, sid: int, metadata) -> coord_pb2.SessionEvent:
    stream = coord_pb2_grpc.SessionsStub(channel).Events(
        coord_pb2.SessionEventsRequest(session_id=sid), timeout=10, metadata=metadata)
    try:
        return next(iter(stream))
    finally:
        stream.cancel()


def test_a_sessions_keepalives_and_events_serve_only_who_may_write_its_name(authed, eps):
    leader = authed.members[authed.wait_for_leader()].listen
    with Client(eps, user="alice", password="alicepw") as alice:
        sid = alice.open_session("alice-kept", ttl=10).session_id
        bob, root = token_of(leader, "bob", "bobpw"), token_of(leader, "root", "rootpw")
        with grpc.insecure_channel(leader) as ch:
            assert rpc_denied(lambda: keepalive(ch, sid, bob)) \
                == "user 'bob' lacks WRITE on session 'alice-kept'"
            assert rpc_denied(lambda: first_event(ch, sid, bob)) \
                == "user 'bob' lacks WRITE on session 'alice-kept'"
            assert keepalive(ch, sid, root).ttl_ms > 0  # root may use any session
            assert keepalive(ch, sid, token_of(leader, "alice", "alicepw")).ttl_ms > 0
            assert rpc_denied(lambda: keepalive(ch, sid, ())) \
                == "a caller without a user lacks WRITE on session 'alice-kept'"
            # served: her stream waits for the session's news (none) until its deadline
            events = coord_pb2_grpc.SessionsStub(ch).Events(
                coord_pb2.SessionEventsRequest(session_id=sid), timeout=2,
                metadata=token_of(leader, "alice", "alicepw"))
            with pytest.raises(grpc.RpcError) as e:
                next(iter(events))
            assert e.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED, e.value


def test_the_etcd_api_reaches_a_native_session_only_as_the_native_api_does(authed, eps):
    """An etcd lease id is a session id, so the etcd API reaches native sessions too: its
    keepalive and revoke of one need WRITE on the session's name, as the native API's
    (an etcd lease, named etcd-lease, needs its keys only, as etcd's)."""
    leader = authed.members[authed.wait_for_leader()].listen
    with Client(eps, user="alice", password="alicepw") as client:
        sid = client.open_session("alice-by-etcd", ttl=10).session_id
        bob, alice = token_of(leader, "bob", "bobpw"), token_of(leader, "alice", "alicepw")
        with grpc.insecure_channel(leader) as ch:
            lease = estubs.LeaseStub(ch)

            def kept(metadata) -> epb.LeaseKeepAliveResponse:
                return next(iter(lease.LeaseKeepAlive(
                    iter([epb.LeaseKeepAliveRequest(ID=sid)]), timeout=10, metadata=metadata)))

            def revoke(metadata) -> epb.LeaseRevokeResponse:
                return lease.LeaseRevoke(epb.LeaseRevokeRequest(ID=sid), timeout=10,
                                         metadata=metadata)

            assert rpc_denied(lambda: kept(bob)) == "etcdserver: permission denied"
            assert rpc_denied(lambda: revoke(bob)) == "etcdserver: permission denied"
            with pytest.raises(grpc.RpcError) as no_user:
                revoke(None)
            assert no_user.value.details() == "etcdserver: user name is empty"
            assert kept(alice).TTL > 0  # still there, and hers to keep
            revoke(alice)
            assert kept(alice).TTL == 0  # gone


LAG_S = 1.5  # how late the follower hears the leader: under its election timeout


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """A 3-member cluster whose members hear each other through gates (to delay or cut
    one off), an election timeout of 3 to 6 s, `set_up_users`' users, auth on."""
    yield from users_cluster(tmp_path_factory, "gated-auth", partitionable=True,
                             election_ticks=60)


def test_a_keepalive_a_lagging_follower_cannot_place_is_checked_before_it_is_forwarded(
        gated):
    """A follower that has not yet applied a session's open does not forward a keepalive
    for it to the leader (who renews by id alone): it catches up first, and answers
    pending meanwhile; caught up, it refuses the user who may not use the session.
    Everything the leader sends the follower arrives LAG_S late, heartbeats too, within
    an election timeout of 3 to 6 s, so the follower keeps its leader."""
    c = gated
    leader = c.wait_for_leader()
    follower = next(n for n in c.members if n != leader)
    on_follower = c.members[follower].listen
    bob = token_of(on_follower, "bob", "bobpw")
    alice_md = token_of(on_follower, "alice", "alicepw")  # known there before the lag
    with grpc.insecure_channel(on_follower) as ch:
        gate = c.members[follower].gate
        gate.delay_s = LAG_S
        try:
            with Client([c.members[leader].listen], user="alice",
                        password="alicepw") as alice:
                sid = alice.open_session("alice-lagged", ttl=10).session_id
                early = keepalive(ch, sid, bob)
                assert early.pending and not early.ttl_ms, early  # not renewed
                wait_until("the follower renews alice's session for her",
                           lambda: keepalive(ch, sid, alice_md).ttl_ms > 0, 30)
                assert rpc_denied(lambda: keepalive(ch, sid, bob)) \
                    == "user 'bob' lacks WRITE on session 'alice-lagged'"
        finally:
            gate.delay_s = 0.0
        wait_until("caught up, a session nobody opened is gone",
                   lambda: keepalive(ch, sid + 1000, bob).gone, 30)


def test_a_follower_that_cannot_catch_up_says_why_not_that_a_token_is_invalid(gated):
    """A token logged in on the leader while a follower is cut off is unknown to the
    follower, which cannot catch up: it answers UNAVAILABLE (no quorum, on either API),
    so the client tries another member, not INVALID_AUTH_TOKEN, which would send it to
    log in again for a token it knows no better. Healed, it serves the token."""
    c = gated
    leader = c.wait_for_leader()
    follower = next(n for n in c.members if n != leader)
    on_follower = c.members[follower].listen
    c.cut_off(follower)
    try:
        wait_until(f"{follower} read-only", lambda: mode_of(c, follower) == "read-only", 30)
        alice = token_of(c.members[leader].listen, "alice", "alicepw")
        with grpc.insecure_channel(on_follower) as ch:
            def etcd_get():
                return estubs.KVStub(ch).Range(epb.RangeRequest(key=b"a/x"), timeout=10,
                                               metadata=alice)

            def own():
                return coord_pb2_grpc.OwnershipStub(ch).Own(coord_pb2.OwnRequest(
                    session_id=1, group="orders/x", claims=[coord_pb2.Claim(resource="r")]),
                    timeout=10,
                    metadata=alice)

            for call in (etcd_get, own):
                with pytest.raises(grpc.RpcError) as e:
                    call()
                assert e.value.code() is grpc.StatusCode.UNAVAILABLE, e.value
                assert "invalid auth token" not in e.value.details()
    finally:
        c.heal(follower)
    with grpc.insecure_channel(on_follower) as ch:
        wait_until(f"{follower} serves alice's token", lambda: _served(
            lambda: estubs.KVStub(ch).Range(epb.RangeRequest(key=b"a/x"), timeout=10,
                                            metadata=alice)), 30)


def _served(call) -> bool:
    """Whether `call()` is served; False while the member says it cannot serve yet."""
    try:
        call()
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return False
        raise
    return True


def test_the_inspection_reads_need_admin_read_on_inspect(authed, eps):
    leader = authed.members[authed.wait_for_leader()].listen
    alice, bob = token_of(leader, "alice", "alicepw"), token_of(leader, "bob", "bobpw")
    with grpc.insecure_channel(leader) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        reads = {
            "ListSessions": lambda m: admin.ListSessions(admin_pb2.ListSessionsRequest(),
                                                         timeout=10, metadata=m),
            "ListProducers": lambda m: admin.ListProducers(admin_pb2.ListProducersRequest(),
                                                           timeout=10, metadata=m),
            "WatchOwnership": lambda m: next(iter(admin.WatchOwnership(
                admin_pb2.WatchOwnershipRequest(), timeout=10, metadata=m))),
            "WatchSessions": lambda m: next(iter(admin.WatchSessions(
                admin_pb2.WatchSessionsRequest(), timeout=10, metadata=m))),
            "WatchProducers": lambda m: next(iter(admin.WatchProducers(
                admin_pb2.WatchProducersRequest(), timeout=10, metadata=m))),
        }
        for name, read in reads.items():
            assert rpc_denied(lambda read=read: read(bob)) \
                == "user 'bob' lacks READ on admin 'inspect'", name
            read(alice)  # served
        assert admin.Status(admin_pb2.StatusRequest(), timeout=10).name  # status: no need


def test_a_history_export_needs_admin_read_on_history(authed, eps, tmp_path):
    """The history holds every command (keys, sessions, users and their grants): a user
    without READ on the `admin` key `history`, and a caller without a user, are refused
    naming it; granted it, `coord history export --user` writes the rows, the grant
    itself among them with who made it."""
    with Client(eps, user="bob", password="bobpw") as bob:
        assert denied(lambda: next(iter(bob.export_history()))) \
            == "user 'bob' lacks READ on admin 'history'"
    with Client(eps) as anonymous:
        assert denied(lambda: next(iter(anonymous.export_history()))) \
            == "a caller without a user lacks READ on admin 'history'"
    cli(eps, "role", "grant-permission", "sessions-only", "read", "history", "--kind", "admin",
        *ROOT)
    try:
        cli(eps, "history", "export", "--out", str(tmp_path / "h"), "--user", "bob:bobpw")
    finally:
        cli(eps, "role", "revoke-permission", "sessions-only", "history", "--kind", "admin",
            *ROOT)
    import pyarrow.parquet as pq

    from coord.history.sink import committed_files

    rows = pq.read_table(committed_files(tmp_path / "h")[1]).to_pylist()
    grants = [(r["actor"], r["role"], r["key"], r["perm"]) for r in rows
              if r["kind"] == "role_grant_permission" and r["key"] == "history"]
    assert grants == [("root", "sessions-only", "history", "READ")]


def test_a_membership_change_names_who_made_it_in_the_history(authed, eps):
    """A learner added and removed as root: both conf-change rows of the exported history
    name the change, the member and root."""
    leader = authed.members[authed.wait_for_leader()].listen
    with AdminClient(leader, timeout=10, user="root", password="rootpw") as admin:
        admin.add_member("ghost", "127.0.0.1:9", learner=True)  # nobody listens there
        admin.remove_member("ghost")
    with Client(eps, user="root", password="rootpw") as root:
        rows = [r for page in root.export_history() for r in page.rows]
    changes = [(r.get("mode"), r.get("member"), r.get("actor")) for r in rows
               if r["kind"] == "conf_change" and r.get("member") == "ghost"]
    assert changes == [("add_learner", "ghost", "root"), ("remove_node", "ghost", "root")]


def test_a_member_local_session_is_checked_as_one_opened_through_the_log(authed):
    """Two members paused: the one left goes read-only and opens member-local sessions
    for read-only clients, only under names their user may write."""
    kept = authed.wait_for_leader()
    others = [n for n in authed.members if n != kept]
    endpoint = authed.members[kept].listen
    alice, bob = token_of(endpoint, "alice", "alicepw"), token_of(endpoint, "bob", "bobpw")
    ro = (("coord-read-only-ok", "1"),)
    try:
        for n in others:
            authed.pause(n)
        wait_until(f"{kept} read-only", lambda: mode_of(authed, kept) == "read-only", 30)
        with grpc.insecure_channel(endpoint) as ch:
            sessions = coord_pb2_grpc.SessionsStub(ch)

            def open_as(name: str, metadata) -> coord_pb2.OpenSessionResponse:
                return sessions.OpenSession(coord_pb2.OpenSessionRequest(
                    name=name, ttl_ms=10_000, read_only_ok=True), timeout=10,
                    metadata=metadata + ro)

            assert rpc_denied(lambda: open_as("alice-local", bob)) \
                == "user 'bob' lacks WRITE on session 'alice-local'"
            opened = open_as("alice-local", alice)
            assert opened.local
            assert keepalive(ch, opened.session_id, alice + ro).local
            assert rpc_denied(lambda: keepalive(ch, opened.session_id, bob + ro)) \
                == "user 'bob' lacks WRITE on session 'alice-local'"
            assert rpc_denied(lambda: sessions.CloseSession(coord_pb2.CloseSessionRequest(
                session_id=opened.session_id), timeout=10, metadata=bob + ro)) \
                == "user 'bob' lacks WRITE on session 'alice-local'"
            sessions.CloseSession(coord_pb2.CloseSessionRequest(
                session_id=opened.session_id), timeout=10, metadata=alice + ro)
    finally:
        resume_paused(authed, others)
    authed.wait_for_leader()
