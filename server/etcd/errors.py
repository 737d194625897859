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
