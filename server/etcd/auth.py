"""etcd's Auth service (etcdserverpb.Auth), as etcd 3.4 answers it: logins, users,
roles and their permissions, auth on and off.

Changes are state-machine commands (`coord.sm.auth_commands`) made as the caller and
proposed like any write; a new password is hashed here first (`PasswordHasher`), so the
log and every member hold only its salted hash. A login is checked here against the
replicated hash and committed as an `Authenticate` that names its token's digest, so
every member learns the token (`coord.server.requests.tokens`). Reads (UserGet, UserList,
RoleGet, RoleList) are served from this member's state after a read barrier, as etcd
serves them linearizably. Who may call what is `access`'s.
"""

from __future__ import annotations

import dataclasses

from coord.etcdpb import auth_pb2, rpc_pb2_grpc
from coord.etcdpb import rpc_pb2 as pb
from coord.server.etcd import convert as conv
from coord.server.etcd import errors as err
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.errors import etcd_call
from coord.server.requests.coordinator import Coordinator, call_timeout
from coord.server.requests.passwords import PasswordHasher
from coord.server.requests.tokens import new_token
from coord.sm import commands as c
from coord.sm.auth import KV, AuthStore


class EtcdAuthService(rpc_pb2_grpc.AuthServicer):
    def __init__(self, coord: Coordinator, access: EtcdAccess,
                 hasher: PasswordHasher | None = None) -> None:
        self.coord = coord
        self.access = access
        self.hasher = hasher or PasswordHasher()

    @property
    def auth(self) -> AuthStore:
        return self.coord.machine.auth

    async def _change(self, cmd, context, actor: str | None = None):
        """Propose an auth change made as the caller (`actor` if already known)."""
        if actor is None:
            actor = await self.access.admin(context)
        cmd = dataclasses.replace(cmd, actor=actor)
        res = err.check(await self.coord.write(cmd, call_timeout(context), local_apply=True))
        return conv.header(self.coord, res.revision)

    async def _read(self, context) -> str:
        """The caller of a read, once this member has caught up with the leader."""
        user = await self.access.user(context)
        await self.coord.barrier(call_timeout(context))
        return user

    # -- auth on and off, logins ------------------------------------------------------------

    @etcd_call
    async def AuthEnable(self, request, context):  # noqa: N802
        return pb.AuthEnableResponse(header=await self._change(c.AuthEnable(), context))

    @etcd_call
    async def AuthDisable(self, request, context):  # noqa: N802
        return pb.AuthDisableResponse(header=await self._change(c.AuthDisable(), context))

    @etcd_call
    async def Authenticate(self, request, context):  # noqa: N802
        """etcd's order: auth must be on, then the password (a user made without one
        cannot log in), then a token sent along must be valid."""
        await self.coord.barrier(call_timeout(context))
        if not self.auth.enabled:
            raise err.AUTH_NOT_ENABLED
        user = self.auth.users.get(request.name)
        if user is not None and user.no_password:
            raise err.NO_PASSWORD_USER
        stored = user.password if user is not None else ""
        if not await self.hasher.verify(request.password, stored):
            raise err.AUTH_FAILED
        await self.access.user(context)
        token, digest = new_token()
        cmd = c.Authenticate(request.name, digest)
        res = err.check(await self.coord.write(cmd, call_timeout(context), local_apply=True))
        return pb.AuthenticateResponse(header=conv.header(self.coord, res.revision),
                                       token=token)

    # -- users -------------------------------------------------------------------------------

    @etcd_call
    async def UserAdd(self, request, context):  # noqa: N802
        actor = await self.access.admin(context)
        no_password = request.options.no_password
        if not request.name:
            raise err.USER_EMPTY
        password_hash = "" if no_password else await self.hasher.hash(request.password)
        cmd = c.UserAdd(request.name, password_hash, no_password)
        return pb.AuthUserAddResponse(header=await self._change(cmd, context, actor))

    @etcd_call
    async def UserDelete(self, request, context):  # noqa: N802
        header = await self._change(c.UserDelete(request.name), context)
        return pb.AuthUserDeleteResponse(header=header)

    @etcd_call
    async def UserChangePassword(self, request, context):  # noqa: N802
        actor = await self.access.admin(context)
        if request.name not in self.auth.users:
            raise err.USER_NOT_FOUND
        cmd = c.UserChangePassword(request.name, await self.hasher.hash(request.password))
        return pb.AuthUserChangePasswordResponse(header=await self._change(cmd, context, actor))

    @etcd_call
    async def UserGrantRole(self, request, context):  # noqa: N802
        header = await self._change(c.UserGrantRole(request.user, request.role), context)
        return pb.AuthUserGrantRoleResponse(header=header)

    @etcd_call
    async def UserRevokeRole(self, request, context):  # noqa: N802
        header = await self._change(c.UserRevokeRole(request.name, request.role), context)
        return pb.AuthUserRevokeRoleResponse(header=header)

    @etcd_call
    async def UserGet(self, request, context):  # noqa: N802
        caller = await self._read(context)
        self.access.check_admin(caller, allowed=caller == request.name)
        user = self.auth.users.get(request.name)
        if user is None:
            raise err.USER_NOT_FOUND
        return pb.AuthUserGetResponse(header=conv.header(self.coord), roles=user.roles)

    @etcd_call
    async def UserList(self, request, context):  # noqa: N802
        self.access.check_admin(await self._read(context))
        return pb.AuthUserListResponse(header=conv.header(self.coord),
                                       users=sorted(self.auth.users))

    # -- roles -------------------------------------------------------------------------------

    @etcd_call
    async def RoleAdd(self, request, context):  # noqa: N802
        return pb.AuthRoleAddResponse(header=await self._change(c.RoleAdd(request.name),
                                                                context))

    @etcd_call
    async def RoleDelete(self, request, context):  # noqa: N802
        return pb.AuthRoleDeleteResponse(header=await self._change(c.RoleDelete(request.role),
                                                                   context))

    @etcd_call
    async def RoleGrantPermission(self, request, context):  # noqa: N802
        """etcd 3.4 crashes on a grant without a permission; coord refuses it."""
        if not request.HasField("perm"):
            raise err.EtcdError(err.Code.INVALID_ARGUMENT, "etcdserver: permission not given")
        p = request.perm
        cmd = c.RoleGrantPermission(request.name, p.permType, p.key, p.range_end,
                                    kind=p.coord_kind or KV)
        return pb.AuthRoleGrantPermissionResponse(header=await self._change(cmd, context))

    @etcd_call
    async def RoleRevokePermission(self, request, context):  # noqa: N802
        cmd = c.RoleRevokePermission(request.role, request.key, request.range_end,
                                     kind=request.coord_kind or KV)
        return pb.AuthRoleRevokePermissionResponse(header=await self._change(cmd, context))

    @etcd_call
    async def RoleGet(self, request, context):  # noqa: N802
        caller = await self._read(context)
        held = caller in self.auth.users and request.role in self.auth.users[caller].roles
        self.access.check_admin(caller, allowed=held)
        role = self.auth.roles.get(request.role)
        if role is None:
            raise err.ROLE_NOT_FOUND
        # an etcd client sees etcd's permissions; coord's asks for every kind
        perms = [auth_pb2.Permission(permType=p.perm_type, key=p.key, range_end=p.range_end,
                                     coord_kind="" if p.kind == KV else p.kind)
                 for p in role.perms if request.coord_kinds or p.kind == KV]
        return pb.AuthRoleGetResponse(header=conv.header(self.coord), perm=perms)

    @etcd_call
    async def RoleList(self, request, context):  # noqa: N802
        self.access.check_admin(await self._read(context))
        return pb.AuthRoleListResponse(header=conv.header(self.coord),
                                       roles=sorted(self.auth.roles))
