"""Who an etcd call is made as, and what etcd 3.4 lets that user do before the call is
served.

The caller is the user its token stands for (the `token` call metadata, or
grpc-gateway's `authorization`, as etcd reads them). A token is checked whenever one is
sent, auth on or off, as etcd does: one this member does not know — after catching up
with the leader, since a login on another member may not have reached it yet — is
etcd's `invalid auth token`. Without a token, a call over TLS whose client certificate
the client port verified (`--client-cert-auth`) is made as the certificate's common
name, as etcd's; a token, when sent, wins. Otherwise the call has no user ("" here);
while auth is on, such a caller is refused whatever needs a user (`user name is empty`).

What a named user may do with keys is checked where the command applies (the command
carries the user: `coord.sm.auth_checks`), so a permission revoked before the command
commits holds; reads and watches, served from this member's state, are checked here,
after the read barrier. Auth administration needs the root role, but for a user's own
record and the roles it holds, which it may read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc

from coord.server.etcd import errors as err
from coord.server.node.errors import NodeError
from coord.server.requests.coordinator import Coordinator, call_timeout
from coord.server.requests.tokens import TokenKeeper
from coord.sm.auth import AuthStore
from coord.sm.auth_checks import key_checks, permitted
from coord.tls.credentials import verified_common_name
from coord.wire import ApiError

TOKEN_METADATA = ("token", "authorization")  # etcd's gRPC and grpc-gateway keys


def _token(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key in TOKEN_METADATA:
            return value
    return None


GATEWAY_METADATA = "grpcgateway-accept"  # a call relayed by etcd's grpc-gateway


def cert_user(context: grpc.aio.ServicerContext) -> str:
    """The user a verified client certificate names (its common name), for a call
    without a token: etcd's --client-cert-auth. "" without one, and for a call that says
    it came through etcd's grpc-gateway, whose certificate is the gateway's, not the
    caller's (etcd ignores its name too)."""
    name = verified_common_name(context)
    if not name or any(key == GATEWAY_METADATA
                       for key, _ in context.invocation_metadata() or ()):
        return ""
    return name


class EtcdAccess:
    def __init__(self, coord: Coordinator, tokens: TokenKeeper) -> None:
        self.coord = coord
        self.tokens = tokens

    @property
    def auth(self) -> AuthStore:
        return self.coord.machine.auth

    async def user(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's user ("" for none); etcd's `invalid auth token` for a token this
        member does not know once it has caught up with the leader."""
        token = _token(context)
        if token is None:
            return cert_user(context) if self.auth.enabled else ""
        user = self.tokens.user_of(token)
        if user is None:
            try:
                await self.coord.barrier(call_timeout(context))
            except (NodeError, ApiError):
                raise err.INVALID_AUTH_TOKEN from None
            user = self.tokens.user_of(token)
        if user is None:
            raise err.INVALID_AUTH_TOKEN
        return user

    async def made_as(self, cmd: Any, context: grpc.aio.ServicerContext) -> Any:
        """`cmd` made as the caller, for apply to check; a caller without a user is
        refused now, while auth is on, if `cmd` touches any key."""
        user = await self.user(context)
        if user:
            return dataclasses.replace(cmd, actor=user)
        if self.auth.enabled and any(key_checks(cmd, self.coord.machine.sessions)):
            raise err.USER_EMPTY
        return cmd

    def check_read(self, user: str, key: bytes, range_end: bytes) -> None:
        """Refuse, as etcd, a read of `key` (or [key, range_end)) by `user`."""
        if not self.auth.enabled:
            return
        if not user:
            raise err.USER_EMPTY
        if not permitted(self.auth, user, key, range_end, False):
            raise err.PERMISSION_DENIED

    def check_admin(self, user: str, allowed: bool = False) -> None:
        """Refuse, as etcd, auth administration by `user` (`allowed`: a read of its own
        record, which for etcd includes a caller without a user reading the user named
        "", or of a role it holds)."""
        if not self.auth.enabled or allowed:
            return
        if not user:
            raise err.USER_EMPTY
        if not self.auth.is_admin(user):
            raise err.PERMISSION_DENIED

    async def admin(self, context: grpc.aio.ServicerContext) -> str:
        """The caller of an administrative call, refused as etcd refuses one who may not:
        the caller of a change is checked again when it applies."""
        user = await self.user(context)
        self.check_admin(user)
        return user

    async def maintenance_admin(self, context: grpc.aio.ServicerContext) -> None:
        """etcd's check on Hash, HashKV, Defragment and Snapshot: the root role while
        auth is on, refused in etcd's untranslated words."""
        try:
            await self.admin(context)
        except err.EtcdError as e:
            raise err.untranslated(e) from None
