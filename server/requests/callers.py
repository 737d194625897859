"""Who a call is made as, the same way on both client APIs.

The caller is the user its token stands for (the `token` call metadata, or
grpc-gateway's `authorization`, as etcd reads them): a token from an etcd Authenticate,
which the client port serves beside the native services, so one login serves both APIs.
One this member does not know — after catching up with the leader, since a login on
another member may not have reached it yet — is refused (`INVALID_AUTH_TOKEN`, which the
etcd API words as etcd's `invalid auth token`). A member that cannot catch up (no
leader, cut off, out of time) answers why, as the read would have, not that the token
is invalid: the token may well be good, and a client told to log in again would log in
elsewhere and bring this member a token it knows no better (etcd waits for the token's
login to apply until the call's deadline). Without a token, a call over TLS whose
client certificate the client port verified (`--client-cert-auth`) is made as the
certificate's common name, as etcd's; a token, when sent, wins. Otherwise the call has
no user ("").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from coord.server.node.errors import NodeError
from coord.server.requests.tokens import TokenKeeper
from coord.sm.auth import AuthStore
from coord.sm.machine import CoordMachine
from coord.tls.credentials import verified_common_name
from coord.wire import ApiError

TOKEN_METADATA = ("token", "authorization")  # etcd's gRPC and grpc-gateway keys
GATEWAY_METADATA = "grpcgateway-accept"  # a call relayed by etcd's grpc-gateway


class InvalidToken(ApiError):
    """A token this member does not know, once caught up with the leader."""

    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAUTHENTICATED, "INVALID_AUTH_TOKEN",
                         "invalid auth token: log in again (it expired, its user changed, "
                         "or auth was switched off)")


def token_of(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key in TOKEN_METADATA:
            return value
    return None


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


class CallerUsers:
    def __init__(self, machine: CoordMachine, tokens: TokenKeeper,
                 barrier: Callable[[float], Awaitable[object]]) -> None:
        self.machine = machine
        self.tokens = tokens
        self.barrier = barrier

    @property
    def auth(self) -> AuthStore:
        return self.machine.auth

    async def user(self, context: grpc.aio.ServicerContext, timeout: float) -> str:
        """The caller's user ("" for none); `InvalidToken` for a token this member does
        not know once it has caught up with the leader (within `timeout`), and the
        reason it could not catch up (an ApiError: NO_LEADER, TIMEOUT, NO_QUORUM, ...)
        when it could not."""
        token = token_of(context)
        if token is None:
            return cert_user(context) if self.auth.enabled else ""
        user = self.tokens.user_of(token)
        if user is None:
            try:
                await self.barrier(timeout)
            except NodeError as e:
                raise e.as_api_error() from None
            user = self.tokens.user_of(token)
        if user is None:
            raise InvalidToken()
        return user
