"""The pipelined stream, client side: one `Pipeline.Stream` per member connection
carries every request the client sends there, each tagged with an id, answered out of
order as the member completes them (ZooKeeper's xid connection).

Requests made in the same loop turn leave in one message (group commit on the client:
the member proposes the writes of a message to Raft together), and the member's answers
arrive batched the same way. `AsyncClient.send` drives this exactly as it drives a unary
call — same request and response messages, same retries and failover — so this module
only carries requests: an operation's error arrives as its own `CoordError`; the stream
failing (the member died, stopped or is unreachable) fails every operation in flight on
it with UNAVAILABLE, which `send` retries on the next member, and the next request opens
a new stream. Each request has its own deadline, and cancelling the task that awaits it
cancels it on the member too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc

from coord.client.errors import CoordError, error_for, from_api_error, from_rpc_error
from coord.client.transport import (
    BidiCall,
    CallCancelled,
    CallEnded,
    Metadata,
    Transport,
    TransportClosed,
)
from coord.tagged_calls import TaggedCalls
from coord.v1 import coord_pb2 as pb
from coord.wire import ApiError, stream_broke

__all__ = ["PIPELINED", "Pipeline", "Pipelines"]

PIPELINED: dict[tuple[str, str], str] = {
    ("KV", "Put"): "put",
    ("KV", "Range"): "range",
    ("KV", "DeleteRange"): "delete_range",
    ("KV", "Txn"): "txn",
    ("KV", "PutIfAbsent"): "put_if_absent",
    ("KV", "CompareAndSet"): "compare_and_set",
    ("Ownership", "Own"): "own",
    ("Ownership", "Release"): "release",
    ("Ownership", "GetOwner"): "get_owner",
    ("Ownership", "ListOwners"): "list_owners",
    ("Producers", "AllocatePidBlock"): "allocate_pid_block",
    ("Producers", "LeasePid"): "lease_pid",
    ("Producers", "InitProducer"): "init_producer",
    ("Producers", "CheckProducer"): "check_producer",
}
"""The unary methods the stream carries, by (service, method): their PipelineOp field.
Sessions (open, close, keepalive), compaction, watches and Admin stay unary."""

def _stream_error(e: BaseException) -> BaseException:
    """What an operation in flight fails with when its stream fails. A stream that broke
    (`coord.wire.stream_broke`) is UNAVAILABLE: go to the next member, as the operation
    may (a read, a write with a request id), not a cancellation of ours nor an error the
    caller must see."""
    if isinstance(e, TransportClosed):
        return TransportClosed()
    if isinstance(e, grpc.RpcError):
        err = from_rpc_error(e)
        if not stream_broke(err.code, err.reason):
            return err
        return error_for("UNAVAILABLE", f"the stream to the member broke ({err.code.name}: "
                         f"{err.message})", grpc.StatusCode.UNAVAILABLE)
    return error_for("UNAVAILABLE", f"the stream ended ({type(e).__name__})",
                     grpc.StatusCode.UNAVAILABLE)


def _deadline_error(timeout: float) -> CoordError:
    return error_for("DEADLINE_EXCEEDED", f"no answer within {timeout:.3g}s",
                     grpc.StatusCode.DEADLINE_EXCEEDED)


class Pipeline:
    """One stream to one member, opened on first use and again after it fails."""

    def __init__(self, transport: Transport, metadata: Callable[[], Metadata]) -> None:
        self._transport = transport
        self._metadata = metadata  # read as each stream opens (a new login's token)
        self._calls: TaggedCalls[pb.PipelineOp] = TaggedCalls()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._calls.pending)

    async def call(self, field: str, request: Any, timeout: float) -> Any:
        """Send one operation (its PipelineOp `field`) and return its response message;
        raises its CoordError, DeadlineError after `timeout`, TransportClosed."""
        if self._closed:
            raise TransportClosed
        if self._calls.stream is None:
            self._open()
        timeout_ms = max(1, int(timeout * 1000))

        def make(tag: int) -> pb.PipelineOp:
            op = pb.PipelineOp(id=tag, timeout_ms=timeout_ms)
            getattr(op, field).CopyFrom(request)
            return op

        return await self._calls.call(make, timeout, _deadline_error, self._cancel)

    def _cancel(self, tag: int) -> None:
        """Tell the member to stop working on an operation we gave up on."""
        if self._calls.stream is not None:
            self._calls.outbox.append(pb.PipelineOp(id=tag, cancel=True))
            self._calls.wake.set()

    def _open(self) -> None:
        call = self._transport.bidi_stream("Pipeline", "Stream", metadata=self._metadata())
        self._calls.opened(call, self._write(call), self._read(call))

    async def _write(self, call: BidiCall) -> None:
        """Everything queued since the last message, as one message."""
        try:
            await call.started()
            await self._calls.send_loop(
                lambda ops: call.write(pb.PipelineRequest(ops=ops)))
        except (CallEnded, CallCancelled, TransportClosed, grpc.RpcError):
            # A write fails only once the call has ended (grpc.aio may say so with an
            # INTERNAL error of its own): the reader gets the call's real status, and
            # fails what is in flight with it.
            return

    async def _read(self, call: BidiCall) -> None:
        settle = self._calls.settle
        try:
            while True:
                message = await call.read()
                if message is None:
                    raise CallEnded
                for result in message.results:
                    kind = result.WhichOneof("response")
                    if kind == "error":
                        settle(result.id, error=from_api_error(ApiError.of_pb(result.error)))
                    else:
                        settle(result.id, getattr(result, kind))
        except (CallEnded, CallCancelled, TransportClosed, grpc.RpcError) as e:
            # what is in flight fails; the next request opens a new stream
            self._calls.ended(call, functools.partial(_stream_error, e))

    def reopen(self) -> None:
        """End the stream (its metadata is stale): what is in flight fails UNAVAILABLE,
        to be retried, and the next operation opens a new one."""
        if self._calls.stream is not None:
            self._calls.ended(self._calls.stream, lambda: error_for(
                "UNAVAILABLE", "the stream reopens with a new login",
                grpc.StatusCode.UNAVAILABLE))

    async def close(self) -> None:
        self._closed = True
        if self._calls.stream is not None:
            self._calls.ended(self._calls.stream, TransportClosed)


class Pipelines:
    """One pipeline per member connection, made on first use."""

    def __init__(self, metadata: Callable[[], Metadata]) -> None:
        self._metadata = metadata
        self._by_endpoint: dict[str, Pipeline] = {}

    def reopen(self) -> None:
        for pipeline in self._by_endpoint.values():
            pipeline.reopen()

    def get(self, endpoint: str, transport: Transport) -> Pipeline:
        pipeline = self._by_endpoint.get(endpoint)
        if pipeline is None:
            pipeline = self._by_endpoint[endpoint] = Pipeline(transport, self._metadata)
        return pipeline

    async def close(self) -> None:
        pipelines = list(self._by_endpoint.values())
        self._by_endpoint.clear()
        for pipeline in pipelines:
            await pipeline.close()
