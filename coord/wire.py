"""What coord's client and server agree on about errors on the wire.

Every failure crosses the wire as a gRPC status code plus a `google.rpc.ErrorInfo` in
domain `coord.dev` whose `reason` is machine-readable: either as a call's status, or
in-band as a `PipelineError` (a pipelined stream's answer to one operation, and the
leader's outcome of one forwarded command). The server picks the code from the reason
(the tables below); `ApiError` is that error as one value, with the one writing and the
one reading of each wire form; the client maps it to a typed exception. Both sides
import this module, so the contract is written once and the client library does not
import the server (which would drag the Raft core, its SQLite log and the peer transport
into every client process).

Only plain data and protobuf live here: nothing of the server or the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from coord.v1 import coord_pb2 as pb

__all__ = [
    "DOMAIN",
    "EXPORT_SLOTS",
    "NODE_ERROR_CODES",
    "RESULT_CODES",
    "ApiError",
    "node_error_code",
    "result_code",
    "stream_broke",
]

DOMAIN = "coord.dev"
"""The ErrorInfo domain of every coord error."""

NODE_ERROR_CODES: Mapping[str, grpc.StatusCode] = MappingProxyType({
    "NOT_LEADER": grpc.StatusCode.FAILED_PRECONDITION,
    "NO_LEADER": grpc.StatusCode.UNAVAILABLE,
    "PROPOSAL_LOST": grpc.StatusCode.UNAVAILABLE,
    "OUTCOME_UNKNOWN": grpc.StatusCode.UNAVAILABLE,
    "TIMEOUT": grpc.StatusCode.DEADLINE_EXCEEDED,
    "STOPPED": grpc.StatusCode.UNAVAILABLE,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
})
"""Reasons a member's Raft node fails a request with (the request never reached the state
machine, or its outcome is unknown), and their status codes."""

RESULT_CODES: Mapping[str, grpc.StatusCode] = MappingProxyType({
    "INVALID_ARGUMENT": grpc.StatusCode.INVALID_ARGUMENT,
    "TOO_LARGE": grpc.StatusCode.INVALID_ARGUMENT,
    "UNKNOWN_SESSION": grpc.StatusCode.NOT_FOUND,
    "UNKNOWN_PRODUCER": grpc.StatusCode.NOT_FOUND,
    "UNKNOWN_PID": grpc.StatusCode.NOT_FOUND,
    "OWNED_BY_HIGHER_GENERATION": grpc.StatusCode.FAILED_PRECONDITION,
    "PRODUCER_FENCED": grpc.StatusCode.FAILED_PRECONDITION,
    "COMPACTED": grpc.StatusCode.OUT_OF_RANGE,
    "FUTURE_REVISION": grpc.StatusCode.OUT_OF_RANGE,
    "PID_CAPACITY_EXHAUSTED": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "REQUEST_ID_REUSED": grpc.StatusCode.ALREADY_EXISTS,
    "SESSION_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "KEY_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "NO_SPACE": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "LIMIT_EXCEEDED": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "PERMISSION_DENIED": grpc.StatusCode.PERMISSION_DENIED,
})
"""Error reasons of state-machine results (the command was applied and refused), and
their status codes; any other result reason is FAILED_PRECONDITION."""


EXPORT_SLOTS = "exports"
"""The `limit` metadata of a LIMIT_EXCEEDED that refused a history export because the
member serves as many as it may: the export may ask again once one of them ends."""


BROKEN_STREAM_CODES = frozenset({grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL})
"""Statuses with which gRPC itself ends a stream whose far end went away: a member that
stops cancels its streams (CANCELLED, when we did not cancel it ourselves), and one
killed mid-stream leaves gRPC's core to end it with INTERNAL ("Internal error from
Core")."""


def stream_broke(code: grpc.StatusCode, reason: str | None) -> bool:
    """Whether a stream that ended with `code` broke, rather than the far end answering:
    one of `BROKEN_STREAM_CODES` without an ErrorInfo `reason` of coord's (`reason` is
    None, or the code's own name where a client's error took that as its reason), as
    coord sends INTERNAL only with one (a failed history export). The client library's
    pipeline and watches, and a follower's forwarding stream to its leader, take such a
    break as UNAVAILABLE: what was in flight is retried on the next member under its
    request id, and a watch resumes there, instead of the caller seeing INTERNAL."""
    return code in BROKEN_STREAM_CODES and (not reason or reason == code.name)


def node_error_code(reason: str) -> grpc.StatusCode:
    """The gRPC code for a node error's reason (UNAVAILABLE for one not listed)."""
    return NODE_ERROR_CODES.get(reason, grpc.StatusCode.UNAVAILABLE)


def result_code(reason: str) -> grpc.StatusCode:
    """The gRPC code for a state-machine result's error reason."""
    return RESULT_CODES.get(reason, grpc.StatusCode.FAILED_PRECONDITION)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


class ApiError(Exception):
    """An error of coord's API as one value: the status code, the ErrorInfo reason and
    metadata, the message. A member raises it from a handler and answers it as a call's
    status (`abort`) or in-band (`as_pb`); a follower reads its leader's outcome back
    (`of_pb`) and a client a failed call (`of_rpc_error`), so an error crosses any number
    of hops as this same value. An empty `reason` is a status without ErrorInfo (a
    transport failure, a stream that broke)."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})

    @classmethod
    def of_pb(cls, error: pb.PipelineError) -> ApiError:
        return cls(_CODES.get(error.code, grpc.StatusCode.UNKNOWN), error.reason,
                   error.message, error.metadata)

    def as_pb(self) -> pb.PipelineError:
        return pb.PipelineError(code=self.code.value[0], reason=self.reason,
                                message=self.message, metadata=self.metadata)

    @classmethod
    def of_rpc_error(cls, err: grpc.RpcError) -> ApiError:
        """What a failed call or stream ended with; a call object that cannot say (not a
        Call, a malformed status) yields UNKNOWN, no reason, or no message, never a raise."""
        code, details = _call_attr(err, "code"), _call_attr(err, "details")
        try:
            info = _error_info(err)
        except (AttributeError, TypeError, ValueError):
            info = None
        reason = info.reason if info is not None else ""
        return cls(code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN,
                   reason, details if isinstance(details, str) else "",
                   info.metadata if info is not None and reason else None)

    def status(self) -> grpc.Status:
        """The error as a call's status, its ErrorInfo packed in the details."""
        info = error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN,
                                           metadata=self.metadata)
        detail = any_pb2.Any()
        detail.Pack(info)
        return rpc_status.to_status(status_pb2.Status(
            code=getattr(code_pb2, self.code.name), message=self.message, details=[detail]))

    async def abort(self, context: Any) -> None:
        """End the call `context` serves with this error (raises, as abort does)."""
        if not self.reason:
            await context.abort(self.code, self.message)
        await context.abort_with_status(self.status())


def _error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo carried by a failed call, if any. Raises what `rpc_status.from_call`
    raises for a call that is not a Call (AttributeError) or whose status details
    contradict its code or message (ValueError)."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


def _call_attr(err: grpc.RpcError, name: str) -> object:
    method = getattr(err, name, None)
    if not callable(method):
        return None
    try:
        return method()
    except Exception:  # a broken call object must not hide the error itself
        return None
