"""Users, roles and auth: `coord auth enable|disable`, `coord user add|get|list|delete|
passwd|grant-role|revoke-role`, `coord role add|get|list|delete|grant-permission|
revoke-permission` — etcdctl's commands, on etcd's Auth service, which a member's client
port serves beside coord's own.

A permission is etcdctl's (a type, a key, a range end or `--prefix`/`--from-key`) with
a `--kind`: `kv` (etcd's keys, the default) or one of the native API's resources
(`group`, `producer`, `session`, `admin`), which coord sends in its own field of etcd's
message; `coord role get` lists every kind."""

from __future__ import annotations

import argparse
from typing import Any

from coord.cli.client_commands.command import (
    UsageError,
    add_command,
    client_settings,
    command,
    tls_credentials,
)
from coord.cli.client_commands.output import emit

PERM_TYPES = {"read": 0, "write": 1, "readwrite": 2}
PERM_NAMES = {v: k.upper() for k, v in PERM_TYPES.items()}
KINDS = ("kv", "group", "producer", "session", "admin")


def _call(args: argparse.Namespace, method: str, **fields: Any) -> Any:
    """etcd's Auth `method` (its request made of `fields`) on the first member that
    answers, logged in as --user."""
    import grpc

    from coord.client.errors import from_rpc_error
    from coord.etcdpb import rpc_pb2 as pb
    from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
    from coord.tls.credentials import channel

    request = getattr(pb, f"Auth{method.removeprefix('Auth')}Request")(**fields)
    endpoints, settings = client_settings(args)
    credentials = tls_credentials(args)
    last: Exception | None = None
    for endpoint in endpoints:
        with channel(endpoint, credentials) as ch:
            auth = etcd_grpc.AuthStub(ch)
            try:
                metadata = ()
                if "user" in settings:
                    token = auth.Authenticate(pb.AuthenticateRequest(
                        name=settings["user"], password=settings["password"]),
                        timeout=args.timeout).token
                    metadata = (("token", token),)
                return getattr(auth, method)(request, timeout=args.timeout, metadata=metadata)
            except grpc.RpcError as e:
                last = from_rpc_error(e)
                if e.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise last from None
    raise last or RuntimeError("no endpoints")


def _listed(args: argparse.Namespace, method: str, field: str) -> int:
    names = list(getattr(_call(args, method), field))
    emit(args, names, lambda: names)
    return 0


def _done(args: argparse.Namespace, what: str, **fields: Any) -> int:
    emit(args, fields, lambda: [what])
    return 0


@command
def cmd_auth_enable(args: argparse.Namespace) -> int:
    """Turn authentication on (needs a user `root` holding the role `root`)."""
    _call(args, "AuthEnable")
    return _done(args, "Authentication Enabled", enabled=True)


@command
def cmd_auth_disable(args: argparse.Namespace) -> int:
    """Turn authentication off (as root)."""
    _call(args, "AuthDisable")
    return _done(args, "Authentication Disabled", enabled=False)


@command
def cmd_user_add(args: argparse.Namespace) -> int:
    """Add a user: NAME:PASSWORD, or NAME with --no-password (client certificate only)."""
    from coord.etcdpb import auth_pb2
    name, _, password = args.name.partition(":")
    if not password and not args.no_password:
        raise UsageError("give the password as NAME:PASSWORD, or --no-password")
    _call(args, "UserAdd", name=name, password=password,
          options=auth_pb2.UserAddOptions(no_password=args.no_password))
    return _done(args, f"User {name} created", user=name)


@command
def cmd_user_get(args: argparse.Namespace) -> int:
    """A user's roles."""
    roles = list(_call(args, "UserGet", name=args.name).roles)
    emit(args, {"user": args.name, "roles": roles},
         lambda: [f"User: {args.name}", f"Roles: {' '.join(roles)}"])
    return 0


@command
def cmd_user_list(args: argparse.Namespace) -> int:
    """Every user."""
    return _listed(args, "UserList", "users")


@command
def cmd_user_delete(args: argparse.Namespace) -> int:
    """Delete a user."""
    _call(args, "UserDelete", name=args.name)
    return _done(args, f"User {args.name} deleted", user=args.name)


@command
def cmd_user_passwd(args: argparse.Namespace) -> int:
    """Change a user's password (its tokens end)."""
    _call(args, "UserChangePassword", name=args.name, password=args.new_password)
    return _done(args, "Password updated", user=args.name)


@command
def cmd_user_grant_role(args: argparse.Namespace) -> int:
    """Grant a user a role."""
    _call(args, "UserGrantRole", user=args.name, role=args.role)
    return _done(args, f"Role {args.role} is granted to user {args.name}",
                 user=args.name, role=args.role)


@command
def cmd_user_revoke_role(args: argparse.Namespace) -> int:
    """Take a role from a user."""
    _call(args, "UserRevokeRole", name=args.name, role=args.role)
    return _done(args, f"Role {args.role} is revoked from user {args.name}",
                 user=args.name, role=args.role)


@command
def cmd_role_add(args: argparse.Namespace) -> int:
    """Add a role."""
    _call(args, "RoleAdd", name=args.role)
    return _done(args, f"Role {args.role} created", role=args.role)


@command
def cmd_role_get(args: argparse.Namespace) -> int:
    """A role's permissions, of every kind."""
    from coord.client.admin_aio import Permission

    perms = [{"kind": p.coord_kind or "kv", "type": PERM_NAMES.get(p.permType, p.permType),
              "key": p.key, "range_end": p.range_end}
             for p in _call(args, "RoleGet", role=args.role, coord_kinds=True).perm]
    emit(args, {"role": args.role, "permissions": perms},
         lambda: [f"Role {args.role}"] + [str(Permission(**p)) for p in perms])
    return 0


@command
def cmd_role_list(args: argparse.Namespace) -> int:
    """Every role."""
    return _listed(args, "RoleList", "roles")


@command
def cmd_role_delete(args: argparse.Namespace) -> int:
    """Delete a role (it is taken from every user)."""
    _call(args, "RoleDelete", role=args.role)
    return _done(args, f"Role {args.role} deleted", role=args.role)


def _range(args: argparse.Namespace) -> tuple[bytes, bytes]:
    """etcdctl's key, range end, --prefix and --from-key as (key, range_end)."""
    from coord.client.keys import prefix_end

    key = args.key.encode()
    if args.prefix and args.from_key:
        raise UsageError("--prefix and --from-key are each other's alternative")
    if (args.prefix or args.from_key) and args.range_end is not None:
        raise UsageError("a range end goes without --prefix or --from-key")
    if args.prefix:
        return key, prefix_end(key)
    if args.from_key:
        return key, b"\0"
    return key, (args.range_end or "").encode()


@command
def cmd_role_grant_permission(args: argparse.Namespace) -> int:
    """Grant a role read, write or readwrite on a key, a range or a prefix of a kind."""
    from coord.etcdpb import auth_pb2
    key, end = _range(args)
    kind = "" if args.kind == "kv" else args.kind
    perm = auth_pb2.Permission(permType=PERM_TYPES[args.type], key=key, range_end=end,
                               coord_kind=kind)
    _call(args, "RoleGrantPermission", name=args.role, perm=perm)
    return _done(args, f"Role {args.role} updated", role=args.role)


@command
def cmd_role_revoke_permission(args: argparse.Namespace) -> int:
    """Revoke a permission (the same kind, key and range end) from a role."""
    from coord.client.admin_aio import Permission

    key, end = _range(args)
    kind = "" if args.kind == "kv" else args.kind
    _call(args, "RoleRevokePermission", role=args.role, key=key, range_end=end,
          coord_kind=kind)
    where = Permission(args.kind, "", key, end).where
    return _done(args, f"Permission of {where} is revoked from role {args.role}",
                 role=args.role)


def _permission_args(p: argparse.ArgumentParser, typed: bool) -> None:
    p.add_argument("role")
    if typed:
        p.add_argument("type", choices=sorted(PERM_TYPES))
    p.add_argument("key", help="a key, or (kind group, producer, session, admin) a name")
    p.add_argument("range_end", nargs="?", help="the end of a range [key, range_end)")
    p.add_argument("--prefix", action="store_true", help="every key starting with key")
    p.add_argument("--from-key", action="store_true", help="every key from key on")
    p.add_argument("--kind", choices=KINDS, default="kv",
                   help="what the key names: etcd's keys (kv, default), an ownership group, "
                   "a producer id, a session name, an admin operation (membership, "
                   "transfer, compact, pid-capacity)")


def register(sub: Any) -> None:
    auth = sub.add_parser("auth", help="authentication on or off")
    auth_sub = auth.add_subparsers(dest="auth_command", required=True)
    add_command(auth_sub, "enable", cmd_auth_enable, cmd_auth_enable.__doc__ or "")
    add_command(auth_sub, "disable", cmd_auth_disable, cmd_auth_disable.__doc__ or "")

    user = sub.add_parser("user", help="users: add, get, list, delete, passwd, grant-role, "
                          "revoke-role")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    p = add_command(user_sub, "add", cmd_user_add, cmd_user_add.__doc__ or "")
    p.add_argument("name", help="NAME:PASSWORD (or NAME with --no-password)")
    p.add_argument("--no-password", action="store_true")
    for name, fn in (("get", cmd_user_get), ("delete", cmd_user_delete)):
        add_command(user_sub, name, fn, fn.__doc__ or "").add_argument("name")
    add_command(user_sub, "list", cmd_user_list, cmd_user_list.__doc__ or "")
    p = add_command(user_sub, "passwd", cmd_user_passwd, cmd_user_passwd.__doc__ or "")
    p.add_argument("name")
    p.add_argument("new_password")
    for name, fn in (("grant-role", cmd_user_grant_role),
                     ("revoke-role", cmd_user_revoke_role)):
        p = add_command(user_sub, name, fn, fn.__doc__ or "")
        p.add_argument("name")
        p.add_argument("role")

    role = sub.add_parser("role", help="roles: add, get, list, delete, grant-permission, "
                          "revoke-permission")
    role_sub = role.add_subparsers(dest="role_command", required=True)
    for name, fn in (("add", cmd_role_add), ("get", cmd_role_get),
                     ("delete", cmd_role_delete)):
        add_command(role_sub, name, fn, fn.__doc__ or "").add_argument("role")
    add_command(role_sub, "list", cmd_role_list, cmd_role_list.__doc__ or "")
    p = add_command(role_sub, "grant-permission", cmd_role_grant_permission,
                    cmd_role_grant_permission.__doc__ or "")
    _permission_args(p, typed=True)
    p = add_command(role_sub, "revoke-permission", cmd_role_revoke_permission,
                    cmd_role_revoke_permission.__doc__ or "")
    _permission_args(p, typed=False)
