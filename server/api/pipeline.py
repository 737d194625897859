"""The pipelined stream (`Pipeline.Stream`): one bidirectional stream per client
connection carries many operations, each tagged with the client's id, answered out of
order as they complete (ZooKeeper's xid connection).

Every operation of a message becomes a task in the same loop turn, so the writes among
them reach the Raft node together and go into the log as one batch (the node proposes
everything that arrived in one turn of its loop), and the reads share one ReadIndex
round. Answers that complete together leave in one message. Each operation is served
by the same code as its unary RPC (`ops`), with the same headers, read-only behaviour
and errors; an error is answered in-band (PipelineError) and the stream goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from coord.server.api.common import DEFAULT_TIMEOUT_S, Caller, clamp_timeout, read_only_flag
from coord.server.api.errors import ApiError
from coord.server.api.ops import OPS
from coord.server.core.coordinator import Coordinator
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc

log = logging.getLogger(__name__)


def error_result(op_id: int, err: ApiError) -> pb.PipelineResult:
    return pb.PipelineResult(id=op_id, error=pb.PipelineError(
        code=err.code.value[0], reason=err.reason, message=err.message, metadata=err.metadata))


class PipelineService(coord_pb2_grpc.PipelineServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    async def Stream(self, request_iterator, context):  # noqa: N802
        await _Connection(self.coord, context).run(request_iterator)


class _Connection:
    """One stream: the operations in flight by id, and the answers waiting to be sent."""

    def __init__(self, coord: Coordinator, context: grpc.aio.ServicerContext) -> None:
        self.coord = coord
        self.context = context
        self.flag = read_only_flag(context.invocation_metadata())
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self.outbox: list[pb.PipelineResult] = []
        self.ready = asyncio.Event()
        self.reading = True

    async def run(self, requests: AsyncIterator[pb.PipelineRequest]) -> None:
        await self.context.send_initial_metadata(())  # the client writes once it has these
        reader = asyncio.ensure_future(self._read(requests))
        try:
            while self.reading or self.in_flight or self.outbox:
                await self.ready.wait()
                self.ready.clear()
                if self.outbox:
                    batch, self.outbox = self.outbox, []
                    await self.context.write(pb.PipelineResponse(results=batch))
            await reader  # re-raises what ended the reading, if anything
        finally:
            reader.cancel()
            for task in list(self.in_flight.values()):
                task.cancel()

    async def _read(self, requests: AsyncIterator[pb.PipelineRequest]) -> None:
        try:
            async for request in requests:
                for op in request.ops:
                    self._start(op)
        finally:
            self.reading = False
            self.ready.set()

    def _start(self, op: pb.PipelineOp) -> None:
        if op.cancel:
            task = self.in_flight.pop(op.id, None)
            if task is not None:
                task.cancel()
            return
        kind = op.WhichOneof("request")
        handler = OPS.get(kind) if kind else None
        if handler is None or op.id in self.in_flight:
            why = f"operation {op.id} is already in flight" if handler else "no operation"
            self._answer(error_result(op.id, ApiError(
                grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", why)))
            return
        timeout = clamp_timeout(op.timeout_ms / 1000) if op.timeout_ms > 0 else DEFAULT_TIMEOUT_S
        caller = Caller(timeout, flag=self.flag)
        self.in_flight[op.id] = asyncio.ensure_future(
            self._serve(op.id, kind, handler(self.coord, caller, getattr(op, kind))))

    async def _serve(self, op_id: int, kind: str, answer) -> None:
        try:
            response = await answer
            result = pb.PipelineResult(id=op_id)
            getattr(result, kind).CopyFrom(response)
        except ApiError as e:
            result = error_result(op_id, e)
        except asyncio.CancelledError:
            return  # the client cancelled it (or the stream ended): nobody to answer
        except Exception as e:  # a bug: answer it as the unary call would, keep the stream
            log.exception("pipelined %s failed", kind)
            result = error_result(op_id, ApiError(grpc.StatusCode.UNKNOWN, "", repr(e)))
        finally:
            if self.in_flight.get(op_id) is asyncio.current_task():
                del self.in_flight[op_id]
        self._answer(result)

    def _answer(self, result: pb.PipelineResult) -> None:
        self.outbox.append(result)
        self.ready.set()
