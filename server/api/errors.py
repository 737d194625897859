"""How a unary handler of the native API ends a call with an error: the error is
`coord.wire.ApiError` (a status code plus a machine-readable ErrorInfo reason, so
clients branch on `reason` instead of parsing messages; `history` imports it from
here)."""

from __future__ import annotations

import grpc

from coord.server.node.errors import NodeError
from coord.wire import ApiError as ApiError


async def abort(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    reason: str,
    message: str,
    metadata: dict[str, str] | None = None,
) -> None:
    await ApiError(code, reason, message, metadata).abort(context)


async def abort_node_error(context: grpc.aio.ServicerContext, err: NodeError) -> None:
    await err.as_api_error().abort(context)
