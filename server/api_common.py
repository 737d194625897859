"""What every client-API handler does: run a command through the coordinator and turn
refusals into gRPC statuses with ErrorInfo, so handlers only build responses."""

from __future__ import annotations

from typing import Any

import grpc

from .coordinator import Coordinator, ForwardedError
from .errors import abort, abort_node_error, result_code
from .node import NodeError

DETAILS_KEY = "grpc-status-details-bin"


async def _fail(context: grpc.aio.ServicerContext, err: Exception) -> None:
    if isinstance(err, NodeError):
        await abort_node_error(context, err)
    elif isinstance(err, ForwardedError):
        # Pass the leader's status through unchanged (code, message and ErrorInfo).
        md = dict(err.error.trailing_metadata() or ())
        details = md.get(DETAILS_KEY)
        if details is not None:
            context.set_trailing_metadata(((DETAILS_KEY, details),))
        await context.abort(err.error.code(), err.error.details())
    raise err


async def check(context: grpc.aio.ServicerContext, result: Any) -> Any:
    """Abort with the result's error, if it carries one; else return it."""
    if result.error:
        metadata = {}
        conflicts = getattr(result, "conflicts", ())
        if conflicts:
            first = conflicts[0]
            metadata = {
                "resource": first.resource,
                "owner": str(first.owner),
                "generation": str(first.generation),
                "conflicts": str(len(conflicts)),
            }
        await abort(context, result_code(result.error), result.error, result.message, metadata)
    return result


async def write(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, in_band: bool = False
) -> Any:
    """Commit `cmd`; its result's error aborts the call unless the API reports errors
    `in_band` (in the response message)."""
    try:
        result = await coord.write(cmd, timeout=call_timeout(context))
    except (NodeError, ForwardedError) as e:
        await _fail(context, e)
    return result if in_band else await check(context, result)


async def read(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, serializable: bool = False
) -> Any:
    try:
        result = await coord.read(cmd, serializable, timeout=call_timeout(context))
    except NodeError as e:
        await _fail(context, e)
    return await check(context, result)


def call_timeout(context: grpc.aio.ServicerContext, default: float = 5.0) -> float:
    remaining = context.time_remaining()
    return default if remaining is None else max(0.05, min(remaining - 0.05, 60.0))


async def invalid(context: grpc.aio.ServicerContext, message: str) -> None:
    await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", message)
