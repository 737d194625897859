"""etcd's auth state in the state machine: etcd 3.4's rules for users, roles, the root
user and role, permissions by key and range, and what apply refuses a user."""

from __future__ import annotations

import base64

import pytest

from coord.sm import commands as c
from coord.sm.auth import READ, READWRITE, WRITE, AuthEvent, parse_password_hash
from coord.sm.auth_checks import permitted
from coord.sm.machine import CoordMachine
from coord.sm.sessions import ETCD_LEASE_NAME

HASH = "scrypt$16384$8$1$" + base64.b64encode(b"s" * 16).decode() + "$" + \
    base64.b64encode(b"h" * 32).decode()


def ok(m: CoordMachine, cmd) -> None:
    res = m.execute(cmd)
    assert res.ok, res


def error(m: CoordMachine, cmd) -> str:
    return m.execute(cmd).error


def with_root(enabled: bool = True) -> CoordMachine:
    m = CoordMachine()
    ok(m, c.UserAdd("root", HASH))
    ok(m, c.UserGrantRole("root", "root"))  # the root role need not exist
    if enabled:
        ok(m, c.AuthEnable())
    return m


def user_with(m: CoordMachine, name: str, *perms: tuple[int, bytes, bytes]) -> None:
    ok(m, c.UserAdd(name, HASH, actor="root"))
    ok(m, c.RoleAdd(f"{name}-role", actor="root"))
    ok(m, c.UserGrantRole(name, f"{name}-role", actor="root"))
    for perm_type, key, end in perms:
        ok(m, c.RoleGrantPermission(f"{name}-role", perm_type, key, end, actor="root"))


def test_auth_needs_a_root_user_with_the_root_role():
    m = CoordMachine()
    assert error(m, c.AuthEnable()) == "ROOT_USER_MISSING"
    ok(m, c.UserAdd("root", HASH))
    assert error(m, c.AuthEnable()) == "ROOT_ROLE_MISSING"
    ok(m, c.UserGrantRole("root", "root"))
    ok(m, c.AuthEnable())
    ok(m, c.AuthEnable(actor="root"))  # again: nothing changes, no error
    assert m.auth.enabled


def test_root_and_its_grant_stay_while_auth_is_on_and_may_go_when_it_is_off():
    m = with_root()
    ok(m, c.RoleAdd("root", actor="root"))
    for cmd in (c.UserDelete("root", actor="root"), c.RoleDelete("root", actor="root"),
                c.UserRevokeRole("root", "root", actor="root")):
        assert error(m, cmd) == "INVALID_AUTH_MGMT"
    ok(m, c.AuthDisable(actor="root"))
    ok(m, c.UserRevokeRole("root", "root"))
    ok(m, c.RoleDelete("root"))
    ok(m, c.UserDelete("root"))


def test_etcds_errors_for_names_and_grants():
    m = with_root(enabled=False)
    assert error(m, c.UserAdd("", HASH)) == "USER_EMPTY"
    assert error(m, c.UserAdd("root", HASH)) == "USER_EXISTS"
    assert error(m, c.RoleAdd("")) == "ROLE_EMPTY"
    ok(m, c.RoleAdd("r"))
    assert error(m, c.RoleAdd("r")) == "ROLE_EXISTS"
    assert error(m, c.UserGrantRole("nobody", "r")) == "USER_NOT_FOUND"
    assert error(m, c.UserGrantRole("root", "nope")) == "ROLE_NOT_FOUND"
    assert error(m, c.UserRevokeRole("root", "r")) == "ROLE_NOT_GRANTED"
    assert error(m, c.RoleRevokePermission("r", b"a")) == "PERMISSION_NOT_GRANTED"
    assert error(m, c.RoleGrantPermission("nope", READ, b"a")) == "ROLE_NOT_FOUND"
    assert error(m, c.UserDelete("nobody")) == "USER_NOT_FOUND"
    assert error(m, c.RoleDelete("nope")) == "ROLE_NOT_FOUND"
    assert error(m, c.UserChangePassword("nobody", HASH)) == "USER_NOT_FOUND"
    assert error(m, c.Authenticate("root", "0" * 64)) == "AUTH_NOT_ENABLED"
    ok(m, c.UserGrantRole("root", "r"))
    ok(m, c.UserGrantRole("root", "r"))  # granted again: no error


def test_a_password_arrives_hashed_and_apply_only_checks_its_form():
    m = CoordMachine()
    assert error(m, c.UserAdd("u", "hunter2")) == "INVALID_ARGUMENT"  # a password, not a hash
    assert error(m, c.UserAdd("u", "")) == "INVALID_ARGUMENT"
    assert error(m, c.UserAdd("u", HASH, no_password=True)) == "INVALID_ARGUMENT"
    ok(m, c.UserAdd("u", "", no_password=True))
    ok(m, c.UserChangePassword("u", HASH))
    assert m.auth.users["u"].no_password  # etcd keeps the flag
    assert parse_password_hash(HASH)[:3] == (16384, 8, 1)
    for bad in ("scrypt$3$8$1$AAAA$AAAA", "bcrypt$16384$8$1$a$b", HASH.replace("$1$", "$0$")):
        with pytest.raises(ValueError):
            parse_password_hash(bad)


def test_deleting_a_role_takes_it_from_every_user():
    m = with_root()
    user_with(m, "u", (READ, b"a", b""))
    ok(m, c.RoleDelete("u-role", actor="root"))
    assert m.auth.users["u"].roles == ()


def test_permissions_are_kept_in_etcds_order_and_a_grant_again_changes_the_type():
    m = with_root()
    ok(m, c.RoleAdd("r", actor="root"))
    for perm_type, key, end in ((READ, b"m", b""), (READ, b"a", b""), (WRITE, b"a", b""),
                                (READ, b"a", b"b"), (READWRITE, b"z", b"\0")):
        ok(m, c.RoleGrantPermission("r", perm_type, key, end, actor="root"))
    perms = [(p.perm_type, p.key, p.range_end) for p in m.auth.roles["r"].perms]
    # a new permission goes before those on the same key (etcd's insertion sort)
    assert perms == [(READ, b"a", b"b"), (WRITE, b"a", b""), (READ, b"m", b""),
                     (READWRITE, b"z", b"\0")]
    ok(m, c.RoleRevokePermission("r", b"a", b"b", actor="root"))
    assert error(m, c.RoleRevokePermission("r", b"a", b"b", actor="root")) \
        == "PERMISSION_NOT_GRANTED"


def test_only_a_root_role_holder_manages_auth_while_it_is_on():
    m = with_root()
    user_with(m, "u", (READWRITE, b"a", b""))
    for cmd in (c.UserAdd("v", HASH, actor="u"), c.RoleAdd("x", actor="u"),
                c.UserGrantRole("u", "root", actor="u"), c.AuthDisable(actor="u"),
                c.UserChangePassword("u", HASH, actor="u")):
        assert error(m, cmd) == "PERMISSION_DENIED"
    ok(m, c.UserGrantRole("u", "root", actor="root"))
    ok(m, c.RoleAdd("x", actor="u"))  # the root role makes any user an admin


def test_auth_changes_move_the_auth_revision_but_not_the_kv_revision():
    m = with_root()
    kv, auth = m.revision, m.auth.revision
    ok(m, c.RoleAdd("r", actor="root"))
    assert (m.revision, m.auth.revision) == (kv, auth + 1)
    assert error(m, c.RoleAdd("r", actor="root")) == "ROLE_EXISTS"
    assert m.auth.revision == auth + 1  # a refusal changes nothing


def test_tokens_are_announced_to_the_members_and_ended_with_their_user():
    m = with_root()
    m.drain_events()
    ok(m, c.Authenticate("root", "d" * 64))
    assert m.drain_events() == [AuthEvent("token", "root", "d" * 64)]
    assert error(m, c.Authenticate("ghost", "d" * 64)) == "AUTH_FAILED"
    user_with(m, "u")
    m.drain_events()
    ok(m, c.UserChangePassword("u", HASH, actor="root"))
    ok(m, c.UserDelete("u", actor="root"))
    ok(m, c.AuthDisable(actor="root"))
    assert m.drain_events() == [AuthEvent("user", "u"), AuthEvent("user", "u"),
                                AuthEvent("all")]


def test_the_auth_state_is_in_the_snapshot():
    m = with_root()
    user_with(m, "u", (READ, b"a", b"b"), (WRITE, b"k", b""))
    other = CoordMachine()
    other.restore(m.snapshot())
    assert other.snapshot() == m.snapshot()
    assert other.auth.users == m.auth.users and other.auth.roles == m.auth.roles
    assert other.auth.enabled and other.auth.revision == m.auth.revision
    assert error(other, c.Put(b"b", b"v", actor="u")) == "PERMISSION_DENIED"


# -- what a user may do with keys (etcd 3.4's answers, run against etcd 3.4.23) ----------

def test_keys_ranges_and_from_key_permissions_as_etcd_checks_them():
    m = with_root()
    user_with(m, "u", (READ, b"", b""), (WRITE, b"a", b""), (READWRITE, b"p/", b"p0"),
              (7, b"q", b""), (READ, b"y", b"b"), (READ, b"z", b"\0"))
    a = m.auth

    def read(key: bytes, end: bytes = b"") -> bool:
        return permitted(a, "u", key, end, False)

    assert not read(b"a") and permitted(a, "u", b"a", b"", True)
    assert not read(b"b") and not read(b"a", b"b") and not read(b"a", b"a\0")
    assert read(b"p/", b"p0") and read(b"p/x", b"p/y") and read(b"p/1")
    assert read(b"z", b"\0") and read(b"zz", b"\0") and read(b"zzz")
    assert not read(b"q") and not permitted(a, "u", b"q", b"", True)  # type 7 grants nothing
    assert not read(b"p/", b"\0")  # from p/ on: the gap between p0 and z
    assert not permitted(a, "nobody", b"a", b"", True)
    assert permitted(a, "root", b"anything", b"\0", True)


def test_apply_refuses_a_command_whose_user_lacks_an_access_it_needs():
    m = with_root()
    user_with(m, "u", (WRITE, b"a", b""), (READWRITE, b"p/", b"p0"))
    ok(m, c.Put(b"a", b"1", actor="u"))
    ok(m, c.Put(b"b", b"1", actor="root"))
    denied = [
        c.Put(b"b", b"1", actor="u"),
        c.Put(b"a", b"1", prev_kv=True, actor="u"),  # prev_kv reads
        c.DeleteRange(b"a", prev_kv=True, actor="u"),
        c.DeleteRange(b"p/", b"q", actor="u"),
        c.Txn((c.Compare.of_version(b"a", "=", 0),), (c.Put(b"p/2", b""),), (), actor="u"),
        c.Txn((), (c.Put(b"p/2", b""),), (c.Put(b"b", b""),), actor="u"),  # both branches
        c.Txn((), (c.Txn((), (c.Put(b"b", b""),)),), actor="u"),  # nested, unlike etcd 3.4
        c.Txn((), (c.Put(b"a", b"", prev_kv=True),), actor="u"),  # unlike etcd 3.4
    ]
    for cmd in denied:
        assert error(m, cmd) == "PERMISSION_DENIED", cmd
    ok(m, c.DeleteRange(b"p/", b"p0", prev_kv=True, actor="u"))
    ok(m, c.Txn((c.Compare.of_version(b"p/1", "=", 0),), (c.Put(b"p/2", b""),),
                (c.Range(b"p/"),), actor="u"))
    ok(m, c.Put(b"b", b"anyone", actor=""))  # no actor: the etcd API checked the caller
    assert m.execute(c.Range(b"a")).kvs[0].value == b"1"  # the refusals changed nothing


def test_a_lease_revoke_or_attach_needs_every_attached_key_writable():
    m = with_root()
    user_with(m, "u", (WRITE, b"a", b""))
    sid = m.execute(c.OpenSession(ETCD_LEASE_NAME, 60_000)).session_id
    ok(m, c.Put(b"b", b"1", sid, actor="root"))
    assert error(m, c.Put(b"a", b"1", sid, actor="u")) == "PERMISSION_DENIED"
    assert error(m, c.CloseSession(sid, actor="u")) == "PERMISSION_DENIED"
    empty = m.execute(c.OpenSession(ETCD_LEASE_NAME, 60_000)).session_id
    ok(m, c.Put(b"a", b"1", empty, actor="u"))
    ok(m, c.CloseSession(empty, actor="u"))


def test_a_permission_revoked_before_a_command_applies_holds():
    m = with_root()
    user_with(m, "u", (READWRITE, b"a", b""))
    ok(m, c.Put(b"a", b"1", actor="u"))
    ok(m, c.RoleRevokePermission("u-role", b"a", actor="root"))
    assert error(m, c.Put(b"a", b"2", actor="u")) == "PERMISSION_DENIED"
    ok(m, c.AuthDisable(actor="root"))
    ok(m, c.Put(b"a", b"2", actor="u"))  # auth off: nothing is checked
