"""grpc_server_handled_total's counting through a Registrar's `wrap`: one tally per method
whether its calls come by the registered or the generic path, each call counted once under
the code it ended with, a streamed response's call when its stream ends."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.server.metrics.grpc_calls import GrpcCalls
from coord.server.transport.grpc_options import EXCLUSIVE_BIND, Registrar


class _KV(erpc.KVServicer):
    async def Put(self, request, context):  # noqa: N802
        return epb.PutResponse()

    async def Range(self, request, context):  # noqa: N802
        await context.abort(grpc.StatusCode.OUT_OF_RANGE, "no such revision")


class _Maintenance(erpc.MaintenanceServicer):
    async def Snapshot(self, request, context):  # noqa: N802
        for i in range(3):
            yield epb.SnapshotResponse(remaining_bytes=2 - i)


@pytest.mark.parametrize("registered", [(), ("/etcdserverpb.KV/Put",)])  # Range: generic
def test_each_call_is_counted_once_under_its_code(registered):
    calls = GrpcCalls()

    async def body() -> None:
        server = grpc.aio.server(options=[EXCLUSIVE_BIND])
        through = Registrar(server, registered, wrap=calls.wrap)
        erpc.add_KVServicer_to_server(_KV(), through)
        erpc.add_MaintenanceServicer_to_server(_Maintenance(), through)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                kv = erpc.KVStub(channel)
                for _ in range(3):
                    await asyncio.wait_for(kv.Put(epb.PutRequest(key=b"k")), 10)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await asyncio.wait_for(kv.Range(epb.RangeRequest(key=b"k")), 10)
                assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE
                stream = erpc.MaintenanceStub(channel).Snapshot(epb.SnapshotRequest())
                assert len([r async for r in stream]) == 3
        finally:
            await server.stop(0)

    asyncio.run(body())
    counted = {(m.service, m.method, m.kind): m.codes for m in calls.methods if m.codes}
    assert counted == {("etcdserverpb.KV", "Put", "unary"): {"OK": 3},
                       ("etcdserverpb.KV", "Range", "unary"): {"OUT_OF_RANGE": 1},
                       ("etcdserverpb.Maintenance", "Snapshot", "server_stream"): {"OK": 1}}
    put = next(m for m in calls.methods if m.method == "Put")
    assert put.seconds.count == 3
    # one tally per method, whichever path registered it
    names = [(m.service, m.method) for m in calls.methods]
    assert len(names) == len(set(names))
