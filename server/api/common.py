"""What every client-API handler does: run a command through the coordinator and turn
refusals into errors with ErrorInfo, so handlers only build responses.

Each step is written once, context-free, raising `ApiError` (a status as a value), for a
`Caller` — what the handler needs to know of whoever asked. A unary call aborts with the
error (`serve`, and the `context` wrappers below); the pipelined stream
(`server/api/pipeline.py`) answers it per operation.

This is also where the member's mode (server/upkeep/mode.py) becomes the request processor:
while read-only, writes are refused and reads are served locally, flagged stale, to
clients that accept read-only service; every other client is told NO_QUORUM.

And where the native API meets etcd's users and roles (`coord.sm.access`): while auth
is on, a write is made as the caller's user (`coord.server.requests.callers`) and checked
where it applies; a read is checked here once served, after its read barrier. Either
refusal is PERMISSION_DENIED naming the permission lacked."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Any, TypeVar

import grpc

from coord.server.node.errors import NodeError
from coord.server.requests.coordinator import Coordinator, call_timeout
from coord.server.upkeep.mode import Refused
from coord.sm.access import Need, denial_message, holds, lacking
from coord.sm.errors import PERMISSION_DENIED
from coord.wire import ApiError, result_code

T = TypeVar("T")

READ_ONLY_OK_KEY = "coord-read-only-ok"
"""Call metadata by which a sessionless client accepts read-only service (ZooKeeper's
"am-i-readonly-client" handshake flag; sessions carry it in OpenSession)."""


def read_only_flag(metadata: Any) -> bool | None:
    """The call's own read-only handshake flag; None if it did not say."""
    for key, value in metadata or ():
        if key == READ_ONLY_OK_KEY:
            return value in ("1", "true")
    return None


class Caller:
    """Who asked: the call's read-only flag (read from its metadata only when the mode
    needs it), its user (found only while auth is on), its time budget and the size of
    its request (0: not measured), which a write must keep within --max-request-bytes."""

    __slots__ = ("_context", "_flag", "_flag_known", "_user", "request_bytes", "timeout")

    def __init__(self, timeout: float, *, flag: bool | None = None,
                 context: grpc.aio.ServicerContext | None = None,
                 request_bytes: int = 0) -> None:
        self.timeout = timeout
        self.request_bytes = request_bytes
        self._context = context
        self._flag = flag
        self._flag_known = context is None or flag is not None
        self._user: str | None = None

    @classmethod
    def of(cls, context: grpc.aio.ServicerContext, request_bytes: int = 0) -> Caller:
        return cls(call_timeout(context), context=context, request_bytes=request_bytes)

    def read_only_ok(self, coord: Coordinator, session_id: int = 0) -> bool:
        """Whether the caller accepts read-only service: the call says so, or the session
        it acts for was opened with read_only_ok."""
        if not self._flag_known:
            self._flag = read_only_flag(self._context.invocation_metadata())
            self._flag_known = True
        if self._flag is not None:
            return self._flag
        session = coord.machine.sessions.get(session_id) if session_id else None
        return bool(session and session.read_only_ok)

    async def user(self, coord: Coordinator) -> str:
        """The caller's user: "" while auth is off, and for a caller without one."""
        if self._user is None:
            if self._context is None or not coord.machine.auth.enabled:
                return ""
            self._user = await coord.callers.user(self._context, self.timeout)
        return self._user


def denied(user: str, need: Need) -> ApiError:
    """The refusal of a call whose user lacks `need`."""
    return ApiError(grpc.StatusCode.PERMISSION_DENIED, PERMISSION_DENIED,
                    denial_message(user, need), {"permission": str(need)})


async def made_as(coord: Coordinator, caller: Caller, cmd: Any) -> Any:
    """`cmd` made as the caller's user, which apply checks while auth is on; a caller
    without a user is refused now whatever `cmd` needs."""
    if not coord.machine.auth.enabled:
        return cmd
    user = await caller.user(coord)
    if not user:
        need = lacking(coord.machine.auth, coord.machine.sessions, user, cmd)
        if need is not None:
            raise denied(user, need)
        return cmd
    native = {"native": True} if hasattr(cmd, "native") else {}
    return dataclasses.replace(cmd, actor=user, **native)


async def check_read(coord: Coordinator, caller: Caller, cmd: Any) -> None:
    """Refuse the caller a read (or a watch's start) `cmd` whose resource it may not
    read; called once this member has caught up (the read's barrier)."""
    if coord.machine.auth.enabled:
        user = await caller.user(coord)
        need = lacking(coord.machine.auth, coord.machine.sessions, user, cmd)
        if need is not None:
            raise denied(user, need)


async def require(coord: Coordinator, caller: Caller, need: Need) -> None:
    """Refuse the caller what needs `need` while auth is on: what a member serves on its
    own (an inspection read, a session's keepalives and events, a member-local
    session), with no command that apply would check."""
    if coord.machine.auth.enabled:
        user = await caller.user(coord)
        if not holds(coord.machine.auth, user, need):
            raise denied(user, need)


def refusal(coord: Coordinator, ro_ok: bool) -> ApiError:
    """What the member's mode answers a call it does not serve: FAILED_PRECONDITION/
    READ_ONLY for a read-only-capable client, UNAVAILABLE/NO_QUORUM (go find a majority)
    otherwise."""
    reason, message = coord.mode.refusal(ro_ok)
    code = (
        grpc.StatusCode.FAILED_PRECONDITION if reason == "READ_ONLY"
        else grpc.StatusCode.UNAVAILABLE
    )
    return ApiError(code, reason, message, {"member": coord.node.me.name})


def admit(coord: Coordinator, caller: Caller, session_id: int = 0) -> bool:
    """Let a read or a stream in; True if it must be served read-only (locally, stale)."""
    mode = coord.mode
    if mode.serving_writes:
        return False
    ro_ok = caller.read_only_ok(coord, session_id)
    if not (mode.read_only and ro_ok):
        raise refusal(coord, ro_ok)
    return True


def checked(result: T) -> T:
    """Raise the result's error, if it carries one; else return it."""
    error = getattr(result, "error", "")
    if error:
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
        raise ApiError(result_code(error), error, result.message, metadata)
    return result


async def commit(coord: Coordinator, caller: Caller, cmd: Any, in_band: bool = False) -> Any:
    """Commit `cmd`; its result's error is raised unless the API reports errors
    `in_band` (in the response message). A leader's refusal of the forwarded command
    is already an ApiError, passed on as it is. A request over --max-request-bytes is
    refused before anything is proposed. A refused permission is never in band."""
    coord.limits.check_request_bytes(caller.request_bytes)
    cmd = await made_as(coord, caller, cmd)
    try:
        result = await coord.write(cmd, timeout=caller.timeout)
    except Refused:  # the member is not read-write (coord.write checks before proposing)
        raise refusal(coord, _writer_read_only_ok(coord, caller, cmd)) from None
    except NodeError as e:
        raise e.as_api_error() from None
    return result if in_band and result.error != PERMISSION_DENIED else checked(result)


def _writer_read_only_ok(coord: Coordinator, caller: Caller, cmd: Any) -> bool:
    if getattr(cmd, "read_only_ok", False):  # OpenSession's handshake flag
        return True
    return caller.read_only_ok(coord, getattr(cmd, "session_id", 0))


async def query(coord: Coordinator, caller: Caller, cmd: Any, serializable: bool = False) -> Any:
    """`cmd` read as `Coordinator.read` reads (the barrier, the caller's permission
    check, the read), served read-only from this member's applied state when the caller
    accepts that and the member is (or goes) read-only."""
    if admit(coord, caller):
        serializable = True  # read-only: this member's applied state is all there is

    async def allowed() -> None:
        await check_read(coord, caller, cmd)

    try:
        return checked(await coord.read(cmd, serializable, caller.timeout, allowed))
    except NodeError as e:  # only the barrier raises one
        if not (coord.mode.read_only and caller.read_only_ok(coord)):
            raise e.as_api_error() from None
    # the member went read-only while we waited: its applied state is all there is
    return checked(await coord.read(cmd, True, caller.timeout, allowed))


def invalid_argument(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", message)


# -- the same steps for a unary call: the error aborts it ---------------------------------


async def serve(context: grpc.aio.ServicerContext, answer: Awaitable[T]) -> T:
    """Await a handler's answer; an ApiError aborts the call with its status."""
    try:
        return await answer
    except ApiError as e:
        await e.abort(context)
        raise  # abort raises; never reached


async def admit_reader(
    context: grpc.aio.ServicerContext, coord: Coordinator, session_id: int = 0
) -> bool:
    try:
        return admit(coord, Caller.of(context), session_id)
    except ApiError as e:
        await e.abort(context)
        raise


async def may_read(context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any) -> None:
    """`check_read` for a stream's start: a refusal aborts it."""
    try:
        await check_read(coord, Caller.of(context), cmd)
    except ApiError as e:
        await e.abort(context)
        raise


async def check(context: grpc.aio.ServicerContext, result: T) -> T:
    try:
        return checked(result)
    except ApiError as e:
        await e.abort(context)
        raise


async def write(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, in_band: bool = False
) -> Any:
    return await serve(context, commit(coord, Caller.of(context), cmd, in_band))


async def read(
    context: grpc.aio.ServicerContext, coord: Coordinator, cmd: Any, serializable: bool = False
) -> Any:
    return await serve(context, query(coord, Caller.of(context), cmd, serializable))


async def invalid(context: grpc.aio.ServicerContext, message: str) -> None:
    await invalid_argument(message).abort(context)
