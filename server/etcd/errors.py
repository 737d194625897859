"""etcd's gRPC errors: the exact status codes and messages etcd's server sends.

etcd clients map these message strings back to typed errors (clientv3's rpctypes,
etcd3's exception classes), so the strings are part of the wire contract and are
copied exactly from etcd's api/v3rpc/rpctypes. Handlers raise `EtcdError`; the
`etcd_call` wrapper turns it (and coord's own refusals and node errors) into the
status etcd would have sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc

from coord.server.node.errors import NodeError
from coord.wire import ApiError

Code = grpc.StatusCode


class EtcdError(Exception):
    """A refusal in etcd's words: a gRPC code and etcd's exact message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


EMPTY_KEY = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: key is not provided")
KEY_NOT_FOUND = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: key not found")
VALUE_PROVIDED = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: value is provided")
LEASE_PROVIDED = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: lease is provided")
TOO_MANY_OPS = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: too many operations in txn request")
DUPLICATE_KEY = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request")
COMPACTED = EtcdError(Code.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted")
FUTURE_REV = EtcdError(
    Code.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision"
)
LEASE_NOT_FOUND = EtcdError(Code.NOT_FOUND, "etcdserver: requested lease not found")
LEASE_EXIST = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: lease already exists")
LEASE_TTL_TOO_LARGE = EtcdError(Code.OUT_OF_RANGE, "etcdserver: too large lease TTL")
REQUEST_TOO_LARGE = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: request is too large")
NO_LEADER = EtcdError(Code.UNAVAILABLE, "etcdserver: no leader")
NOT_LEADER = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: not leader")
LEADER_CHANGED = EtcdError(Code.UNAVAILABLE, "etcdserver: leader changed")
STOPPED = EtcdError(Code.UNAVAILABLE, "etcdserver: server stopped")
TIMEOUT = EtcdError(Code.UNAVAILABLE, "etcdserver: request timed out")
NO_SPACE = EtcdError(Code.RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded")

# etcd's auth errors (etcd 3.4.23's answers, read off a running etcd)
AUTH_NOT_ENABLED = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: authentication is not enabled")
AUTH_FAILED = EtcdError(Code.INVALID_ARGUMENT,
                        "etcdserver: authentication failed, invalid user ID or password")
INVALID_AUTH_TOKEN = EtcdError(Code.UNAUTHENTICATED, "etcdserver: invalid auth token")
PERMISSION_DENIED = EtcdError(Code.PERMISSION_DENIED, "etcdserver: permission denied")
USER_EMPTY = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: user name is empty")
ROOT_USER_MISSING = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: root user does not exist")
ROOT_ROLE_MISSING = EtcdError(Code.FAILED_PRECONDITION,
                              "etcdserver: root user does not have root role")
USER_EXISTS = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: user name already exists")
USER_NOT_FOUND = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: user name not found")
ROLE_EMPTY = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: role name is empty")
ROLE_EXISTS = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: role name already exists")
ROLE_NOT_FOUND = EtcdError(Code.FAILED_PRECONDITION, "etcdserver: role name not found")
ROLE_NOT_GRANTED = EtcdError(Code.FAILED_PRECONDITION,
                             "etcdserver: role is not granted to the user")
PERMISSION_NOT_GRANTED = EtcdError(Code.FAILED_PRECONDITION,
                                   "etcdserver: permission is not granted to the role")
INVALID_AUTH_MGMT = EtcdError(Code.INVALID_ARGUMENT, "etcdserver: invalid auth management")
# etcd answers these untranslated: code UNKNOWN and its auth package's own words
NO_PASSWORD_USER = EtcdError(
    Code.UNKNOWN, "auth: authentication failed, password was given for no password user")


def untranslated(e: EtcdError) -> EtcdError:
    """`e` as etcd 3.4's Maintenance service answers an auth refusal: not translated
    to a gRPC status, so code UNKNOWN and the auth package's "auth: ..." message."""
    return EtcdError(Code.UNKNOWN, "auth: " + e.message.removeprefix("etcdserver: "))

# coord state-machine refusals (result.error) in etcd's words. UNKNOWN_SESSION is
# "lease not found" because an etcd lease is a coord session.
_RESULT_ERRORS: dict[str, EtcdError] = {
    "UNKNOWN_SESSION": LEASE_NOT_FOUND,
    "SESSION_EXISTS": LEASE_EXIST,
    "KEY_NOT_FOUND": KEY_NOT_FOUND,
    "COMPACTED": COMPACTED,
    "FUTURE_REVISION": FUTURE_REV,
    "TOO_LARGE": REQUEST_TOO_LARGE,
    "NO_SPACE": NO_SPACE,
    "PERMISSION_DENIED": PERMISSION_DENIED,
    "AUTH_NOT_ENABLED": AUTH_NOT_ENABLED,
    # a login whose user went away before it committed: etcd's answer to that login
    "AUTH_FAILED": AUTH_FAILED,
    "ROOT_USER_MISSING": ROOT_USER_MISSING,
    "ROOT_ROLE_MISSING": ROOT_ROLE_MISSING,
    "INVALID_AUTH_MGMT": INVALID_AUTH_MGMT,
    "USER_EMPTY": USER_EMPTY,
    "USER_EXISTS": USER_EXISTS,
    "USER_NOT_FOUND": USER_NOT_FOUND,
    "ROLE_EMPTY": ROLE_EMPTY,
    "ROLE_EXISTS": ROLE_EXISTS,
    "ROLE_NOT_FOUND": ROLE_NOT_FOUND,
    "ROLE_NOT_GRANTED": ROLE_NOT_GRANTED,
    "PERMISSION_NOT_GRANTED": PERMISSION_NOT_GRANTED,
}

# coord node errors (NodeError.reason, or a forwarded status's ErrorInfo reason).
_NODE_ERRORS: dict[str, EtcdError] = {
    "NO_LEADER": NO_LEADER,
    "NOT_LEADER": NOT_LEADER,
    "PROPOSAL_LOST": LEADER_CHANGED,
    "OUTCOME_UNKNOWN": TIMEOUT,
    "TIMEOUT": TIMEOUT,
    "STOPPED": STOPPED,
    "UNAVAILABLE": NO_LEADER,
}


def check(result: Any) -> Any:
    """The result, or its refusal raised as etcd's error."""
    if result.error:
        known = _RESULT_ERRORS.get(result.error)
        if known is not None:
            raise known
        # Anything else is input etcd has no dedicated error for (coord's own limits).
        raise EtcdError(Code.INVALID_ARGUMENT, f"etcdserver: {result.message}")
    return result


def from_exception(err: Exception) -> EtcdError:
    if isinstance(err, EtcdError):
        return err
    if isinstance(err, NodeError):
        return _NODE_ERRORS.get(err.reason, NO_LEADER)
    if isinstance(err, ApiError):  # the leader's answer to a forwarded command
        known = _RESULT_ERRORS.get(err.reason) or _NODE_ERRORS.get(err.reason)
        return known or EtcdError(err.code, f"etcdserver: {err.message}")
    raise err


def etcd_call(fn: Callable) -> Callable:
    """Wrap a unary handler: any refusal ends the call with etcd's status and message."""

    @functools.wraps(fn)
    async def run(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await fn(self, request, context)
        except (EtcdError, NodeError, ApiError) as e:
            err = from_exception(e)
            await context.abort(err.code, err.message)

    return run
