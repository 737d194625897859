"""`grpc_server_handled_total` and `grpc_server_handling_seconds` (go-grpc-prometheus's
names, which etcd exports): every method handler of the client port, wrapped once when it
is registered (`GrpcCalls.wrap`, given to the transport's `Registrar`), counts its calls
by status code and times them. Nothing is looked up per call: each wrapper holds its
method's own counts."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from prometheus_client.core import CounterMetricFamily, Metric

from coord.server.metrics.tally import GRPC_BUCKETS, Tally, family

OK = grpc.StatusCode.OK
KINDS = {(False, False): "unary", (False, True): "server_stream",
         (True, False): "client_stream", (True, True): "bidi_stream"}
"""go-grpc-prometheus's grpc_type, by (request streaming, response streaming)."""


class MethodTally:
    """One method's calls: how many ended with each code, and how long they took."""

    __slots__ = ("codes", "kind", "method", "seconds", "service")

    def __init__(self, full_method: str, kind: str) -> None:
        self.service, _, self.method = full_method.lstrip("/").rpartition("/")
        self.kind = kind
        self.codes: dict[str, int] = {}
        self.seconds = Tally(GRPC_BUCKETS)

    def ended(self, started: float, context: grpc.aio.ServicerContext,
              error: BaseException | None) -> None:
        """Count a call that ended (`error`: what its handler raised, if anything)."""
        self.seconds.observe(time.perf_counter() - started)
        code = context.code()
        if code is None or (error is not None and code is OK):
            cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
            code = OK if error is None else (
                grpc.StatusCode.CANCELLED if cancelled else grpc.StatusCode.UNKNOWN)
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        self.codes[name] = self.codes.get(name, 0) + 1


class GrpcCalls:
    """Every wrapped method's tally, and the two metrics made of them."""

    def __init__(self) -> None:
        self.methods: list[MethodTally] = []

    def wrap(self, full_method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """`handler` counting and timing its calls; one whose behaviour is not a coroutine
        or async generator function (gRPC would run it in a thread) is left as it is."""
        behavior = (handler.unary_unary or handler.unary_stream or handler.stream_unary
                    or handler.stream_stream)
        if not (inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)):
            return handler
        kind = KINDS[(bool(handler.request_streaming), bool(handler.response_streaming))]
        tally = MethodTally(full_method, kind)
        self.methods.append(tally)
        make = {"unary": grpc.unary_unary_rpc_method_handler,
                "server_stream": grpc.unary_stream_rpc_method_handler,
                "client_stream": grpc.stream_unary_rpc_method_handler,
                "bidi_stream": grpc.stream_stream_rpc_method_handler}[kind]
        return make(_timed(behavior, tally), request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)

    def collect(self) -> Iterator[Metric]:
        labels = ["grpc_type", "grpc_service", "grpc_method"]
        handled = CounterMetricFamily("grpc_server_handled_total", "RPCs completed on the"
                                      " server, by status code.", labels=[*labels, "grpc_code"])
        for m in self.methods:
            for code, n in sorted(m.codes.items()):
                handled.add_metric([m.kind, m.service, m.method, code], n)
        yield handled
        yield family("grpc_server_handling_seconds", "Response latency (seconds) of the RPCs"
                     " handled by the server.",
                     (((m.kind, m.service, m.method), m.seconds) for m in self.methods
                      if m.seconds.count), labels)


def _timed(behavior: Callable, tally: MethodTally) -> Callable:
    """`behavior` (a coroutine function, or an async generator function for a streaming
    response written by yielding) reporting to `tally` when its call ends."""
    if inspect.isasyncgenfunction(behavior):
        async def streamed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started, error = time.perf_counter(), None
            try:
                async for response in behavior(request, context):
                    yield response
            except BaseException as e:
                error = e
                raise
            finally:
                tally.ended(started, context, error)
        return streamed

    async def called(request: Any, context: grpc.aio.ServicerContext) -> Any:
        started, error = time.perf_counter(), None
        try:
            return await behavior(request, context)
        except BaseException as e:
            error = e
            raise
        finally:
            tally.ended(started, context, error)
    return called
