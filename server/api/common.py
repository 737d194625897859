"""What every client-API handler does: run a command through the coordinator and turn
refusals into gRPC statuses with ErrorInfo, so handlers only build responses.

This is also where the member's mode (server/mode.py) becomes the request processor:
while read-only, writes are refused and reads are served locally, flagged stale, to
clients that accept read-only service; every other client is told NO_QUORUM."""

from __future__ import annotations

from typing import Any

import grpc

from coord.server.api.errors import abort, abort_node_error, result_code
from coord.server.core.coordinator import Coordinator, ForwardedError
from coord.server.core.mode import Refused
from coord.server.node.errors import NodeError

DETAILS_KEY = "grpc-status-details-bin"
READ_ONLY_OK_KEY = "coord-read-only-ok"
"""Call metadata by which a sessionless client accepts read-only service (ZooKeeper's
"am-i-readonly-client" handshake flag; sessions carry it in OpenSession)."""


def read_only_ok(
    context: grpc.aio.ServicerContext, coord: Coordinator, session_id: int = 0
) -> bool:
    """Whether the caller accepts read-only service: the call says so, or the session
    it acts for was opened with read_only_ok."""
    for key, value in context.invocation_metadata() or ():
        if key == READ_ONLY_OK_KEY:
            return value in ("1", "true")
    session = coord.machine.sessions.get(session_id) if session_id else None
    return bool(session and session.read_only_ok)


async def refuse(context: grpc.aio.ServicerContext, coord: Coordinator, ro_ok: bool) -> None:
    """Abort a call the member's mode does not serve: FAILED_PRECONDITION/READ_ONLY for a
    read-only-capable client, UNAVAILABLE/NO_QUORUM (go find a majority) otherwise."""
    reason, message = coord.mode.refusal(ro_ok)
    code = (
        grpc.StatusCode.FAILED_PRECONDITION if reason == "READ_ONLY"
        else grpc.StatusCode.UNAVAILABLE
    )
    await abort(context, code, reason, message, {"member": coord.node.me.name})


async def admit_reader(
    context: grpc.aio.ServicerContext, coord: Coordinator, session_id: int = 0
) -> bool:
    """Let a read or a stream in; True if it must be served read-only (locally, stale)."""
    mode = coord.mode
    if mode.serving_writes:
        return False
    ro_ok = read_only_ok(context, coord, session_id)
    if not (mode.read_only and ro_ok):
        await refuse(context, coord, ro_ok)
    return True


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
        if getattr(result, "compact_revision", 0):
            metadata["compact_revision"] = str(result.compact_revision)
        await abort(context, result_code(result.error), result.error, result.message, metadata)
    return result


async def write(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, in_band: bool = False
) -> Any:
    """Commit `cmd`; its result's error aborts the call unless the API reports errors
    `in_band` (in the response message)."""
    try:
        result = await coord.write(cmd, timeout=call_timeout(context))
    except Refused:  # the member is not read-write (coord.write checks before proposing)
        await refuse(context, coord, _writer_read_only_ok(context, coord, cmd))
    except (NodeError, ForwardedError) as e:
        await _fail(context, e)
    return result if in_band else await check(context, result)


def _writer_read_only_ok(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any
) -> bool:
    if getattr(cmd, "read_only_ok", False):  # OpenSession's handshake flag
        return True
    return read_only_ok(context, coord, getattr(cmd, "session_id", 0))


async def read(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, serializable: bool = False
) -> Any:
    if await admit_reader(context, coord):
        serializable = True  # read-only: this member's applied state is all there is
    try:
        result = await coord.read(cmd, serializable, timeout=call_timeout(context))
    except NodeError as e:
        if not (coord.mode.read_only and read_only_ok(context, coord)):
            await _fail(context, e)
        result = coord.machine.query(cmd)  # the member went read-only while we waited
    return await check(context, result)


def call_timeout(context: grpc.aio.ServicerContext, default: float = 5.0) -> float:
    remaining = context.time_remaining()
    return default if remaining is None else max(0.05, min(remaining - 0.05, 60.0))


async def invalid(context: grpc.aio.ServicerContext, message: str) -> None:
    await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", message)
