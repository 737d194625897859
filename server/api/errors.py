"""API errors: a gRPC status code plus a machine-readable reason (google.rpc.ErrorInfo),
so clients branch on `reason` instead of parsing messages. The domain and the
reason -> code tables are the wire contract shared with the client (`coord.wire`)."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from coord.server.node.errors import NodeError, NotLeader
from coord.v1 import coord_pb2 as pb
from coord.wire import DOMAIN, error_info, node_error_code
from coord.wire import reason_of as reason_of  # re-exported: server modules read it here
from coord.wire import result_code as result_code  # re-exported for the API services


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


class ApiError(Exception):
    """A refusal as a value: the status a unary call fails with (code, ErrorInfo reason
    and metadata, message), so one handler serves both a unary call (which aborts with
    it) and the pipelined stream (which answers it per operation). An empty `reason`
    is a status without ErrorInfo (a forwarded transport failure)."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = metadata or {}

    @classmethod
    def of_node_error(cls, err: NodeError) -> ApiError:
        metadata = {}
        if isinstance(err, NotLeader) and err.leader is not None:
            metadata = {"leader": err.leader.name, "leader_peer_address": err.leader.peer_address}
        return cls(node_error_code(err.reason), err.reason, str(err), metadata)

    @classmethod
    def of_rpc_error(cls, err: grpc.aio.AioRpcError) -> ApiError:
        """A status another member (the leader) answered, passed through unchanged."""
        try:
            info = error_info(err)
        except (AttributeError, TypeError, ValueError):
            info = None
        if info is None:
            return cls(err.code(), "", err.details() or "")
        return cls(err.code(), info.reason, err.details() or "", dict(info.metadata))

    def as_pb(self) -> pb.PipelineError:
        """The error in-band, as a pipelined stream answers it."""
        return pb.PipelineError(code=self.code.value[0], reason=self.reason,
                                message=self.message, metadata=self.metadata)

    async def abort(self, context: grpc.aio.ServicerContext) -> None:
        if not self.reason:
            await context.abort(self.code, self.message)
        await abort(context, self.code, self.reason, self.message, self.metadata)


async def abort(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    reason: str,
    message: str,
    metadata: dict[str, str] | None = None,
) -> None:
    await context.abort_with_status(status_for(code, reason, message, metadata))


async def abort_node_error(context: grpc.aio.ServicerContext, err: NodeError) -> None:
    await ApiError.of_node_error(err).abort(context)
