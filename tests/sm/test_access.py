"""The native API's typed resources under etcd's users and roles: what apply refuses a
user, named, and what the permission kinds keep apart."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm.access import Need, lacking, needs
from coord.sm.auth import ADMIN, GROUP, KV, PRODUCER, READ, READWRITE, SESSION, WRITE
from coord.sm.auth_checks import permitted
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim
from coord.sm.sessions import ETCD_LEASE_NAME
from tests.sm.test_auth import HASH, error, ok, with_root


def grant(m: CoordMachine, user: str, *perms: tuple[str, int, bytes, bytes]) -> None:
    """`user` with a role of its own holding `perms` (kind, type, key, range_end)."""
    ok(m, c.UserAdd(user, HASH, actor="root"))
    ok(m, c.RoleAdd(f"{user}-role", actor="root"))
    ok(m, c.UserGrantRole(user, f"{user}-role", actor="root"))
    for kind, perm_type, key, end in perms:
        ok(m, c.RoleGrantPermission(f"{user}-role", perm_type, key, end, actor="root",
                                    kind=kind))


def session(m: CoordMachine, name: str = "s", actor: str = "") -> int:
    res = m.execute(c.OpenSession(name, 10_000, actor=actor))
    assert res.ok, res
    return res.session_id


def refused(m: CoordMachine, cmd) -> str:
    res = m.execute(cmd)
    assert res.error == "PERMISSION_DENIED", res
    return res.message


def test_a_group_permission_lets_its_holder_own_there_and_nowhere_else():
    m = with_root()
    grant(m, "alice", (GROUP, WRITE, b"orders/", b"orders0"),
          (SESSION, WRITE, b"alice-", b"alice."))
    sid = session(m, "alice-1")
    ok(m, c.Own(sid, "orders/eu", (Claim("p0", 0),), actor="alice"))
    ok(m, c.Release(sid, "orders/eu", ("p0",), actor="alice"))
    assert refused(m, c.Own(sid, "billing", (Claim("p0", 0),), actor="alice")) \
        == "user 'alice' lacks WRITE on group 'billing'"
    assert refused(m, c.Release(sid, "billing", ("p0",), actor="alice")) \
        == "user 'alice' lacks WRITE on group 'billing'"
    assert m.ownership.get_owner("billing", "p0").owner == 0  # refused whole


def test_a_producer_prefix_covers_init_epoch_bumps_pid_blocks_and_leases():
    m = with_root()
    grant(m, "bob", (PRODUCER, READWRITE, b"tx-bob-", b"tx-bob."))
    first = m.execute(c.InitProducer("tx-bob-1", actor="bob"))
    bumped = m.execute(c.InitProducer("tx-bob-1", actor="bob"))  # an epoch bump
    assert first.ok and bumped.generation == first.generation + 1
    ok(m, c.AllocatePidBlock("tx-bob-pids", 10, actor="bob"))
    ok(m, c.LeasePid("tx-bob-topic", 0, random_generation=5, actor="bob"))
    assert refused(m, c.InitProducer("tx-carol-1", actor="bob")) \
        == "user 'bob' lacks WRITE on producer 'tx-carol-1'"
    assert "producer 'other'" in refused(m, c.AllocatePidBlock("other", 10, actor="bob"))
    assert "producer 'topic'" in refused(m, c.LeasePid("topic", 0, 5, actor="bob"))


def test_owning_or_releasing_for_another_users_session_needs_its_name():
    m = with_root()
    grant(m, "alice", (GROUP, WRITE, b"orders/", b"orders0"),
          (SESSION, WRITE, b"alice-", b"alice."))
    mine, theirs = session(m, "alice-1"), session(m, "bob-1")
    ok(m, c.Own(theirs, "orders/eu", (Claim("p0", 0),), actor="root"))
    assert refused(m, c.Release(theirs, "orders/eu", ("p0",), actor="alice")) \
        == "user 'alice' lacks WRITE on session 'bob-1'"
    assert refused(m, c.Own(theirs, "orders/eu", (Claim("p1", 0),), actor="alice")) \
        == "user 'alice' lacks WRITE on session 'bob-1'"
    assert m.ownership.get_owner("orders/eu", "p0").owner == theirs
    # the group grant still lets her take the resource over in her own session
    ok(m, c.Own(mine, "orders/eu", (Claim("p0", 0),), actor="alice"))
    assert m.ownership.get_owner("orders/eu", "p0").owner == mine


def test_kinds_are_apart_a_group_grant_is_no_key_grant():
    m = with_root()
    grant(m, "u", (GROUP, READWRITE, b"a", b"\0"))
    assert permitted(m.auth, "u", b"a", b"", True, GROUP)
    assert not permitted(m.auth, "u", b"a", b"", True, KV)
    assert not permitted(m.auth, "u", b"a", b"", True, PRODUCER)
    assert refused(m, c.Put(b"a", b"v", actor="u")) == "user 'u' lacks WRITE on kv b'a'"
    # the same key and range in two kinds are two permissions: revoke takes one
    ok(m, c.RoleGrantPermission("u-role", READ, b"a", b"\0", actor="root"))
    assert len(m.auth.roles["u-role"].perms) == 2
    ok(m, c.RoleRevokePermission("u-role", b"a", b"\0", actor="root", kind=GROUP))
    assert [p.kind for p in m.auth.roles["u-role"].perms] == [KV]
    assert error(m, c.RoleGrantPermission("u-role", READ, b"a", actor="root", kind="disk")) \
        == "INVALID_ARGUMENT"


def test_sessions_opening_and_revoking_another_s_needs_its_name():
    m = with_root()
    grant(m, "alice", (SESSION, WRITE, b"alice-", b"alice."))
    mine = session(m, "alice-1", actor="alice")
    theirs = session(m, "bob-1")
    assert refused(m, c.OpenSession("bob-2", 10_000, actor="alice")) \
        == "user 'alice' lacks WRITE on session 'bob-2'"
    assert refused(m, c.CloseSession(theirs, actor="alice", native=True)) \
        == "user 'alice' lacks WRITE on session 'bob-1'"
    ok(m, c.CloseSession(mine, actor="alice", native=True))
    # the etcd API's revoke of a native session (by its id) needs its name too; of an
    # etcd lease, the attached keys only, as etcd's
    assert refused(m, c.CloseSession(theirs, actor="alice")) \
        == "user 'alice' lacks WRITE on session 'bob-1'"
    ok(m, c.CloseSession(session(m, ETCD_LEASE_NAME), actor="alice"))


def test_admin_commands_need_their_admin_key_and_etcds_compact_needs_none():
    m = with_root()
    grant(m, "op", (ADMIN, WRITE, b"compact", b""))
    for value in (b"1", b"2", b"3"):
        ok(m, c.Put(b"k", value))
    ok(m, c.Compact(m.revision - 2, actor="op", native=True))
    assert refused(m, c.SetPidCapacity(10, actor="op")) \
        == "user 'op' lacks WRITE on admin 'pid-capacity'"
    grant(m, "nobody")
    ok(m, c.Compact(m.revision - 1, actor="nobody"))  # etcd's Compact checks no permission
    assert refused(m, c.Compact(m.revision, actor="nobody", native=True)) \
        == "user 'nobody' lacks WRITE on admin 'compact'"


def test_a_revoked_permission_holds_from_the_next_command():
    m = with_root()
    grant(m, "alice", (GROUP, WRITE, b"g", b""), (SESSION, WRITE, b"alice-1", b""))
    sid = session(m, "alice-1")
    ok(m, c.Own(sid, "g", (Claim("r", 0),), actor="alice"))
    ok(m, c.RoleRevokePermission("alice-role", b"g", actor="root", kind=GROUP))
    assert refused(m, c.Own(sid, "g", (Claim("r2", 0),), actor="alice")) \
        == "user 'alice' lacks WRITE on group 'g'"


def test_root_may_do_anything_and_nothing_is_checked_with_auth_off():
    m = with_root()
    sid = session(m)
    ok(m, c.Own(sid, "any", (Claim("r", 0),), actor="root"))
    off = with_root(enabled=False)
    grant(off, "u")
    ok(off, c.InitProducer("p", actor="u"))
    assert lacking(m.auth, m.sessions, "nobody", c.GetOwner("g", "r")) \
        == Need(GROUP, b"g", b"", False)


def test_reads_need_read_access_to_their_resource():
    m = with_root()
    sessions = m.sessions
    assert list(needs(c.GetOwner("g", "r"), sessions)) == [Need(GROUP, b"g", b"", False)]
    assert list(needs(c.ListOwners("g"), sessions)) == [Need(GROUP, b"g", b"", False)]
    assert list(needs(c.CheckProducer("p", 1, 1), sessions)) \
        == [Need(PRODUCER, b"p", b"", False)]
    assert list(needs(c.Range(b"a", b"b"), sessions)) == [Need(KV, b"a", b"b", False)]
    assert list(needs(c.EventsSince(1, b"a", b"\0"), sessions)) \
        == [Need(KV, b"a", b"\0", False)]
    assert str(Need(KV, b"a", b"b", False)) == "READ on kv b'a' to b'b'"
