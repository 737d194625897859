"""The commands that change etcd's auth state (`coord.sm.auth`), in the vocabulary of
`coord.sm.commands` (which gives them their tags).

`actor` is the user the change was asked as: "" when auth was off or the caller had no
user, which the etcd API refuses before proposing while auth is on. While auth is on,
apply refuses a named actor without the root role, so a grant revoked just before
commits is honoured. Passwords arrive as hashes made by the member that took the
request; a login arrives verified, as the digest of the token it issues.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuthEnable:
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class AuthDisable:
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class Authenticate:
    """A login verified by the member that took it: every member's token keeper learns
    the token by its sha256 hex digest (`token_digest`)."""

    user: str
    token_digest: str
    request_id: str = ""


@dataclass(frozen=True)
class UserAdd:
    user: str
    password_hash: str  # coord.sm.auth.PASSWORD_SCHEME; "" with no_password
    no_password: bool = False
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class UserDelete:
    user: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class UserChangePassword:
    user: str
    password_hash: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class UserGrantRole:
    user: str
    role: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class UserRevokeRole:
    user: str
    role: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class RoleAdd:
    role: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class RoleDelete:
    role: str
    actor: str = ""
    request_id: str = ""


@dataclass(frozen=True)
class RoleGrantPermission:
    """perm_type: etcd's READ 0, WRITE 1, READWRITE 2; range_end as a Range's; kind:
    what the key names (coord.sm.auth.KINDS; etcd's own API grants "kv" only)."""

    role: str
    perm_type: int
    key: bytes
    range_end: bytes = b""
    actor: str = ""
    request_id: str = ""
    kind: str = "kv"


@dataclass(frozen=True)
class RoleRevokePermission:
    role: str
    key: bytes
    range_end: bytes = b""
    actor: str = ""
    request_id: str = ""
    kind: str = "kv"


AuthCommand = (
    AuthEnable | AuthDisable | Authenticate | UserAdd | UserDelete | UserChangePassword
    | UserGrantRole | UserRevokeRole | RoleAdd | RoleDelete | RoleGrantPermission
    | RoleRevokePermission
)
