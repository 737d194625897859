"""The pipelined stream (`Pipeline.Stream`): one bidirectional stream per client
connection carries many operations, each tagged with the client's id, answered out of
order as they complete (ZooKeeper's xid connection).

Every operation of a message becomes a task in the same loop turn, so the writes among
them reach the Raft node together and go into the log as one batch (the node proposes
everything that arrived in one turn of its loop), and the reads share one ReadIndex
round. Answers that complete together leave in one message. Each operation is served
by the same code as its unary RPC (`ops`), with the same headers, read-only behaviour
and errors; an error is answered in-band (PipelineError) and the stream goes on.

What one stream makes the member hold is bounded (`TaggedStream`): a message of more
than MAX_BATCH operations ends the stream (RESOURCE_EXHAUSTED), and no further message
is read while MAX_BATCH operations are in flight."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from coord.server.api.common import Caller, read_only_flag
from coord.server.api.ops import OPS
from coord.server.requests.coordinator import DEFAULT_TIMEOUT_S, Coordinator, clamp_timeout
from coord.server.transport.tagged_stream import TaggedStream
from coord.tagged_calls import MAX_BATCH
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc
from coord.wire import ApiError


def error_result(op_id: int, err: ApiError) -> pb.PipelineResult:
    return pb.PipelineResult(id=op_id, error=err.as_pb())


class PipelineService(coord_pb2_grpc.PipelineServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self.on_message: Callable[[int], None] | None = None  # told each message's op count

    async def Stream(self, request_iterator, context):  # noqa: N802
        await context.send_initial_metadata(())  # the client writes once it has these
        flag = read_only_flag(context.invocation_metadata())

        async def send(results: list[pb.PipelineResult]) -> None:
            await context.write(pb.PipelineResponse(results=results))

        stream = TaggedStream(send, _failed)

        def take(request: pb.PipelineRequest) -> None:
            if len(request.ops) > MAX_BATCH:
                raise ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED",
                               f"a message of {len(request.ops)} operations; the limit is "
                               f"{MAX_BATCH} to a message", {"limit": "ops-per-message",
                                                               "max": str(MAX_BATCH)})
            if self.on_message is not None:
                self.on_message(len(request.ops))
            for op in request.ops:
                if op.cancel:
                    stream.cancel(op.id)
                    continue
                kind = op.WhichOneof("request")
                handler = OPS.get(kind) if kind else None
                if handler is None or op.id in stream.in_flight:
                    why = f"operation {op.id} is already in flight" if handler else "no operation"
                    stream.answer(_invalid(op.id, why))
                    continue
                timeout = (clamp_timeout(op.timeout_ms / 1000) if op.timeout_ms > 0
                           else DEFAULT_TIMEOUT_S)
                request = getattr(op, kind)
                caller = Caller(timeout, flag=flag, context=context,
                                request_bytes=request.ByteSize())
                answer = handler(self.coord, caller, request)
                stream.start(op.id, _result(op.id, kind, answer))

        try:
            await stream.run(request_iterator, take)
        except ApiError as e:
            await e.abort(context)


async def _result(op_id: int, kind: str, answer: Awaitable[Any]) -> pb.PipelineResult:
    try:
        response = await answer
    except ApiError as e:
        return error_result(op_id, e)
    result = pb.PipelineResult(id=op_id)
    getattr(result, kind).CopyFrom(response)
    return result


def _invalid(op_id: int, why: str) -> pb.PipelineResult:
    return error_result(op_id, ApiError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", why))


def _failed(op_id: int, e: BaseException) -> pb.PipelineResult:
    """A bug in a handler: answered as the unary call would be (UNKNOWN)."""
    return error_result(op_id, ApiError(grpc.StatusCode.UNKNOWN, "", repr(e)))
