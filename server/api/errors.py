"""API errors: a gRPC status code plus a machine-readable reason (google.rpc.ErrorInfo),
so clients branch on `reason` instead of parsing messages."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from coord.server.node.driver import NodeError, NotLeader

DOMAIN = "coord.dev"

_CODES: dict[str, grpc.StatusCode] = {
    "NOT_LEADER": grpc.StatusCode.FAILED_PRECONDITION,
    "NO_LEADER": grpc.StatusCode.UNAVAILABLE,
    "PROPOSAL_LOST": grpc.StatusCode.UNAVAILABLE,
    "OUTCOME_UNKNOWN": grpc.StatusCode.UNAVAILABLE,
    "TIMEOUT": grpc.StatusCode.DEADLINE_EXCEEDED,
    "STOPPED": grpc.StatusCode.UNAVAILABLE,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
}


_RESULT_CODES: dict[str, grpc.StatusCode] = {
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
}


def result_code(reason: str) -> grpc.StatusCode:
    """The gRPC code for a state-machine result's error reason."""
    return _RESULT_CODES.get(reason, grpc.StatusCode.FAILED_PRECONDITION)


def status_for(
    code: grpc.StatusCode, reason: str, message: str, metadata: dict[str, str] | None = None
) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata or {})
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(
        code=getattr(code_pb2, code.name), message=message, details=[detail]
    )
    return rpc_status.to_status(status)


async def abort(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    reason: str,
    message: str,
    metadata: dict[str, str] | None = None,
) -> None:
    await context.abort_with_status(status_for(code, reason, message, metadata))


async def abort_node_error(context: grpc.aio.ServicerContext, err: NodeError) -> None:
    metadata = {}
    if isinstance(err, NotLeader) and err.leader is not None:
        metadata = {"leader": err.leader.name, "leader_peer_address": err.leader.peer_address}
    code = _CODES.get(err.reason, grpc.StatusCode.UNAVAILABLE)
    await abort(context, code, err.reason, str(err), metadata)


def reason_of(err: grpc.RpcError) -> str | None:
    """The ErrorInfo reason carried by a failed call, if any (client side)."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return None
