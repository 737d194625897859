"""etcd's auth state, replicated: users, roles and their key-range permissions, whether
auth is on, and the auth revision — the rules of etcd 3.4's auth store, applied the same
way on every member.

Apply never hashes: a password arrives already hashed by the member that took the
request (`PASSWORD_SCHEME`, salted scrypt with its parameters written beside the hash)
and is only checked for its form here; a login is verified on the member that takes it,
against the hash replicated here, and committed as an `Authenticate` that names the
token's digest, so every member learns the token (as etcd 3.4's simple tokens) while
its lifetime stays a member-local matter (`AuthEvent`s tell each member's keeper).

etcd's rules: auth cannot be enabled without a user `root` holding the role `root`
(which need not exist as a role: it grants everything); while auth is on, that user,
that role and that grant cannot be removed; deleting a role takes it from every user;
a permission granted again on the same key and range end changes its type. Checks of
what a user may do with keys are `coord.sm.auth_checks`.

coord's native API is governed by the same users and roles: a permission has a `kind`,
etcd's keys ("kv", the one the etcd API sees, shared with the native KV service) or one
of the native API's typed resources (`KINDS`), each named by a key or a range of keys
exactly as etcd's key permissions are (`coord.sm.access` says which command needs what).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from coord.sm import auth_commands as ac
from coord.sm.canonical_json import from_plain, to_plain
from coord.sm.errors import (
    AUTH_FAILED,
    AUTH_NOT_ENABLED,
    INVALID_ARGUMENT,
    INVALID_AUTH_MGMT,
    PERMISSION_DENIED,
    PERMISSION_NOT_GRANTED,
    ROLE_EMPTY,
    ROLE_EXISTS,
    ROLE_NOT_FOUND,
    ROLE_NOT_GRANTED,
    ROOT_ROLE_MISSING,
    ROOT_USER_MISSING,
    USER_EMPTY,
    USER_EXISTS,
    USER_NOT_FOUND,
    CommandError,
)
from coord.sm.ledger import Ledger, operation
from coord.sm.limits import MAX_KEY_BYTES, MAX_NAME_BYTES, utf8_len
from coord.sm.results import Result

ROOT = "root"  # etcd's special user and role
READ, WRITE, READWRITE = 0, 1, 2  # etcd's authpb.Permission.Type
PERM_NAMES = {READ: "READ", WRITE: "WRITE", READWRITE: "READWRITE"}

# What a permission is on: etcd's keys, or a native API resource named by a key (its
# name's UTF-8 bytes): an ownership group, a producer id (transactional id, PID-block
# requester, lease topic), a session name, an administrative operation
# (`coord.sm.access.ADMIN_OPS`).
KV, GROUP, PRODUCER, SESSION, ADMIN = "kv", "group", "producer", "session", "admin"
KINDS = (KV, GROUP, PRODUCER, SESSION, ADMIN)

PASSWORD_SCHEME = "scrypt"
"""A stored password: `scrypt$N$r$p$SALT$HASH` (salt and hash in base64), the parameters
kept with the hash so they can change without invalidating stored ones."""
MAX_PASSWORD_HASH_BYTES = 512
MAX_SCRYPT_MEMORY = 64 << 20  # 128 * N * r bytes: what verifying one password takes
MAX_SCRYPT_P = 16

# Token digests: the sha256 hex of a token; the token itself never enters the log.
TOKEN_DIGEST_LEN = 64


class Permission(NamedTuple):
    """What a role may do with a key (`range_end` b""), a range [key, range_end), or every
    key from `key` on (`range_end` b"\\0"), of `kind` (`KINDS`). A type etcd does not
    know is kept (etcd keeps it) and grants nothing."""

    perm_type: int
    key: bytes
    range_end: bytes
    kind: str = KV


@dataclass(frozen=True)
class User:
    name: str
    password: str  # PASSWORD_SCHEME form; "" for a user created without a password
    roles: tuple[str, ...] = ()  # sorted
    no_password: bool = False  # etcd's UserAddOptions.no_password: certificate (CN) only


@dataclass(frozen=True)
class Role:
    name: str
    perms: tuple[Permission, ...] = ()  # ordered by key (etcd's order)


@dataclass(frozen=True)
class AuthEvent:
    """What each member's token keeper must hear of, emitted at apply: a token issued
    (`kind` "token": its user and digest), a user's tokens ended ("user": deleted, or its
    password changed) or every token ended ("all": auth disabled)."""

    kind: str
    user: str = ""
    token_digest: str = ""


def parse_password_hash(text: str) -> tuple[int, int, int, bytes, bytes]:
    """(N, r, p, salt, hash) of a stored password; ValueError if it is not one. Checks
    the form only (apply's part): it never hashes."""
    parts = text.split("$")
    if len(parts) != 6 or parts[0] != PASSWORD_SCHEME:
        raise ValueError(f"a password hash is {PASSWORD_SCHEME}$N$r$p$SALT$HASH")
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        digest = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        raise ValueError("a password hash has decimal parameters and base64 salt and hash"
                         ) from None
    if not (1 < n and n & (n - 1) == 0 and 0 < r and 128 * n * r <= MAX_SCRYPT_MEMORY
            and 0 < p <= MAX_SCRYPT_P and len(salt) >= 16 and len(digest) >= 32):
        raise ValueError(f"scrypt parameters out of bounds (N a power of 2, 128*N*r at most "
                         f"{MAX_SCRYPT_MEMORY} bytes, p 1..{MAX_SCRYPT_P}, a salt of 16 bytes "
                         "or more, a hash of 32 or more)")
    return n, r, p, salt, digest


def _name(text: Any, what: str, empty_error: str) -> str:
    if type(text) is not str:
        raise CommandError(INVALID_ARGUMENT, f"{what} name must be a str")
    if not text:
        raise CommandError(empty_error, f"{what} name is empty")
    if utf8_len(text) > MAX_NAME_BYTES:
        raise CommandError(INVALID_ARGUMENT, f"{what} name is over {MAX_NAME_BYTES} bytes")
    return text


def _key(value: Any, what: str) -> bytes:
    if type(value) is not bytes or len(value) > MAX_KEY_BYTES:
        raise CommandError(INVALID_ARGUMENT, f"{what} must be bytes of at most {MAX_KEY_BYTES}")
    return value


def _kind(value: Any) -> str:
    if type(value) is not str or value not in KINDS:
        raise CommandError(INVALID_ARGUMENT, f"a permission's kind is one of {', '.join(KINDS)}")
    return value


def _password(value: Any, no_password: bool) -> str:
    if type(value) is not str or utf8_len(value) > MAX_PASSWORD_HASH_BYTES:
        raise CommandError(INVALID_ARGUMENT, "password_hash must be a short str")
    if no_password:
        if value:
            raise CommandError(INVALID_ARGUMENT, "a user without password has no hash")
        return value
    try:
        parse_password_hash(value)
    except ValueError as exc:
        raise CommandError(INVALID_ARGUMENT, str(exc)) from None
    return value


@dataclass
class AuthStore:
    ledger: Ledger
    enabled: bool = False
    revision: int = 1  # etcd's auth revision: moves with every change of auth state
    users: dict[str, User] = field(default_factory=dict)
    roles: dict[str, Role] = field(default_factory=dict)
    # (user, kind) -> its merged permissions (coord.sm.auth_checks), rebuilt after changes
    merged: dict[str, Any] = field(default_factory=dict)

    # -- reads ---------------------------------------------------------------------------

    def is_admin(self, user: str) -> bool:
        """Whether `user` holds the root role (it may do anything)."""
        u = self.users.get(user)
        return u is not None and ROOT in u.roles

    def admin_refusal(self, actor: str) -> str:
        """The reason `actor` may not manage auth ("" if it may): while auth is on, only
        a root-role holder may; '' (no user) is the caller the etcd API already checked."""
        if not self.enabled or not actor or self.is_admin(actor):
            return ""
        return PERMISSION_DENIED

    # -- changes -------------------------------------------------------------------------

    def apply(self, cmd: ac.AuthCommand) -> Result:
        """Run one of `coord.sm.auth_commands`."""
        t = type(cmd)
        if t is ac.AuthEnable:
            return self.enable(cmd.actor)
        if t is ac.AuthDisable:
            return self.disable(cmd.actor)
        if t is ac.Authenticate:
            return self.authenticate(cmd.user, cmd.token_digest)
        if t is ac.UserAdd:
            return self.user_add(cmd.actor, cmd.user, cmd.password_hash, cmd.no_password)
        if t is ac.UserDelete:
            return self.user_delete(cmd.actor, cmd.user)
        if t is ac.UserChangePassword:
            return self.user_change_password(cmd.actor, cmd.user, cmd.password_hash)
        if t is ac.UserGrantRole:
            return self.user_grant_role(cmd.actor, cmd.user, cmd.role)
        if t is ac.UserRevokeRole:
            return self.user_revoke_role(cmd.actor, cmd.user, cmd.role)
        if t is ac.RoleAdd:
            return self.role_add(cmd.actor, cmd.role)
        if t is ac.RoleDelete:
            return self.role_delete(cmd.actor, cmd.role)
        if t is ac.RoleGrantPermission:
            return self.role_grant_permission(
                cmd.actor, cmd.role,
                Permission(cmd.perm_type, cmd.key, cmd.range_end, cmd.kind))
        if t is ac.RoleRevokePermission:
            return self.role_revoke_permission(cmd.actor, cmd.role, cmd.key, cmd.range_end,
                                               cmd.kind)
        raise TypeError(f"not an auth command: {t.__name__}")

    def _changed(self, *events: AuthEvent) -> None:
        self.revision += 1
        self.merged.clear()
        for e in events:
            self.ledger.emit(e)
        self.ledger.mark()  # as etcd's: auth changes leave the key-value revision alone

    def _admin(self, actor: Any) -> None:
        if type(actor) is not str:
            raise CommandError(INVALID_ARGUMENT, "actor must be a str")
        if self.admin_refusal(actor):
            raise CommandError(PERMISSION_DENIED, f"{actor!r:.60} does not hold the root role")

    def _user(self, name: str) -> User:
        user = self.users.get(name)
        if user is None:
            raise CommandError(USER_NOT_FOUND, f"user {name!r:.60} not found")
        return user

    def _role(self, name: str) -> Role:
        role = self.roles.get(name)
        if role is None:
            raise CommandError(ROLE_NOT_FOUND, f"role {name!r:.60} not found")
        return role

    @operation(Result)
    def enable(self, actor: str) -> Result:
        self._admin(actor)
        if not self.enabled:
            root = self.users.get(ROOT)
            if root is None:
                raise CommandError(ROOT_USER_MISSING, "root user does not exist")
            if ROOT not in root.roles:
                raise CommandError(ROOT_ROLE_MISSING, "root user does not have root role")
            self.enabled = True
            self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def disable(self, actor: str) -> Result:
        self._admin(actor)
        if self.enabled:
            self.enabled = False
            self._changed(AuthEvent("all"))
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def authenticate(self, user: str, token_digest: str) -> Result:
        """A login the receiving member verified: every member's keeper learns its token.
        Refused if auth went off or the user went away since (no state changes)."""
        if not self.enabled:
            raise CommandError(AUTH_NOT_ENABLED, "authentication is not enabled")
        if type(token_digest) is not str or len(token_digest) != TOKEN_DIGEST_LEN:
            raise CommandError(INVALID_ARGUMENT, "token_digest must be a sha256 hex digest")
        if type(user) is not str or user not in self.users:
            raise CommandError(AUTH_FAILED, "authentication failed, invalid user ID or password")
        self.ledger.emit(AuthEvent("token", user, token_digest))
        self.ledger.mark()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def user_add(self, actor: str, name: str, password_hash: str, no_password: bool) -> Result:
        self._admin(actor)
        _name(name, "user", USER_EMPTY)
        if type(no_password) is not bool:
            raise CommandError(INVALID_ARGUMENT, "no_password must be a bool")
        _password(password_hash, no_password)
        if name in self.users:
            raise CommandError(USER_EXISTS, f"user name {name!r:.60} already exists")
        self.users[name] = User(name, password_hash, (), no_password)
        self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def user_delete(self, actor: str, name: str) -> Result:
        self._admin(actor)
        if self.enabled and name == ROOT:
            raise CommandError(INVALID_AUTH_MGMT, "the root user stays while auth is on")
        self._user(name)
        del self.users[name]
        self._changed(AuthEvent("user", name))
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def user_change_password(self, actor: str, name: str, password_hash: str) -> Result:
        self._admin(actor)
        user = self._user(name)
        # etcd hashes a new password even for a user made without one, and keeps the flag
        _password(password_hash, False)
        self.users[name] = replace(user, password=password_hash)
        self._changed(AuthEvent("user", name))
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def user_grant_role(self, actor: str, name: str, role: str) -> Result:
        self._admin(actor)
        user = self._user(name)
        if role != ROOT:
            self._role(role)
        if role not in user.roles:  # granted again: nothing changes, and no error
            self.users[name] = replace(user, roles=tuple(sorted((*user.roles, role))))
            self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def user_revoke_role(self, actor: str, name: str, role: str) -> Result:
        self._admin(actor)
        if self.enabled and name == ROOT and role == ROOT:
            raise CommandError(INVALID_AUTH_MGMT, "root keeps the root role while auth is on")
        user = self._user(name)
        if role not in user.roles:
            raise CommandError(ROLE_NOT_GRANTED, "role is not granted to the user")
        self.users[name] = replace(user, roles=tuple(r for r in user.roles if r != role))
        self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def role_add(self, actor: str, name: str) -> Result:
        self._admin(actor)
        _name(name, "role", ROLE_EMPTY)
        if name in self.roles:
            raise CommandError(ROLE_EXISTS, f"role name {name!r:.60} already exists")
        self.roles[name] = Role(name)
        self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def role_delete(self, actor: str, name: str) -> Result:
        self._admin(actor)
        if self.enabled and name == ROOT:
            raise CommandError(INVALID_AUTH_MGMT, "the root role stays while auth is on")
        self._role(name)
        del self.roles[name]
        for user in [u for u in self.users.values() if name in u.roles]:
            self.users[user.name] = replace(user, roles=tuple(r for r in user.roles
                                                              if r != name))
        self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def role_grant_permission(self, actor: str, name: str, perm: Permission) -> Result:
        """etcd's rule: the first permission on the same key, if its range end (and
        kind) is the same, changes type; else the new one goes before those on the same
        key."""
        self._admin(actor)
        role = self._role(name)
        if type(perm.perm_type) is not int or not 0 <= perm.perm_type < 1 << 31:
            raise CommandError(INVALID_ARGUMENT, "perm_type must be an int32 >= 0")
        _key(perm.key, "key")
        _key(perm.range_end, "range_end")
        _kind(perm.kind)
        perms = list(role.perms)
        at = next((i for i, p in enumerate(perms) if p.key >= perm.key), len(perms))
        same = next((i for i in range(at, len(perms)) if perms[i].key == perm.key
                     and perms[i].kind == perm.kind), None)
        if same is not None and perms[same].range_end == perm.range_end:
            perms[same] = perm
        else:
            perms.insert(at, perm)
        self.roles[name] = replace(role, perms=tuple(perms))
        self._changed()
        return Result(revision=self.ledger.revision)

    @operation(Result)
    def role_revoke_permission(self, actor: str, name: str, key: bytes,
                               range_end: bytes, kind: str = KV) -> Result:
        self._admin(actor)
        role = self._role(name)
        kept = tuple(p for p in role.perms
                     if (p.key, p.range_end, p.kind) != (key, range_end, kind))
        if len(kept) == len(role.perms):
            raise CommandError(PERMISSION_NOT_GRANTED, "permission is not granted to the role")
        self.roles[name] = replace(role, perms=kept)
        self._changed()
        return Result(revision=self.ledger.revision)

    # -- snapshot ------------------------------------------------------------------------

    def to_state(self) -> dict:
        return {
            "enabled": self.enabled,
            "revision": self.revision,
            "users": [to_plain(User, self.users[n]) for n in sorted(self.users)],
            "roles": [to_plain(Role, self.roles[n]) for n in sorted(self.roles)],
        }

    def load_state(self, state: Any) -> None:
        if type(state) is not dict or state.keys() != {"enabled", "revision", "users", "roles"}:
            raise ValueError("bad auth state")
        self.enabled = from_plain(bool, state["enabled"])
        self.revision = from_plain(int, state["revision"])
        users = [from_plain(User, u) for u in state["users"]]
        roles = [from_plain(Role, r) for r in state["roles"]]
        self.users = {u.name: u for u in users}
        self.roles = {r.name: r for r in roles}
        if len(self.users) != len(users) or len(self.roles) != len(roles):
            raise ValueError("auth state names a user or role twice")
        self.merged = {}

    def describe(self) -> dict:
        return {"auth_enabled": self.enabled, "auth_revision": self.revision,
                "users": len(self.users), "roles": len(self.roles)}
