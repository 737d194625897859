"""`Registrar`: services added through it are served by their generic handlers, and only
those it names keep the registered-method copy generated code adds; they answer as before."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.server.transport.grpc_options import EXCLUSIVE_BIND, Registrar


class _Recording:
    """Stands in for a gRPC server: records what is added to it."""

    def __init__(self) -> None:
        self.generic: list = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.registered.append(service)


class _KV(erpc.KVServicer):
    async def Put(self, request, context):  # noqa: N802
        return epb.PutResponse(header=epb.ResponseHeader(revision=7))


def test_only_the_services_it_names_are_registered():
    direct, through = _Recording(), _Recording()
    for server in (direct, Registrar(through, ["etcdserverpb.Lease"])):  # type: ignore[arg-type]
        erpc.add_KVServicer_to_server(_KV(), server)
        erpc.add_LeaseServicer_to_server(erpc.LeaseServicer(), server)
    # generated code adds both copies; through Registrar the generic ones all arrive, and
    # the registered copy only of the service named
    assert direct.registered == ["etcdserverpb.KV", "etcdserverpb.Lease"]
    assert len(direct.generic) == 2
    assert through.registered == ["etcdserverpb.Lease"] and len(through.generic) == 2


@pytest.mark.parametrize("registered", [(), ("etcdserverpb.KV",)])
def test_a_service_added_through_it_answers_and_unknown_methods_are_unimplemented(registered):
    async def body() -> None:
        server = grpc.aio.server(options=[EXCLUSIVE_BIND])
        erpc.add_KVServicer_to_server(_KV(), Registrar(server, registered))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                kv = erpc.KVStub(channel)
                put = await asyncio.wait_for(kv.Put(epb.PutRequest(key=b"k", value=b"v")), 10)
                assert put.header.revision == 7
                # a method of the service the servicer does not implement
                try:
                    await asyncio.wait_for(kv.Compact(epb.CompactionRequest(revision=1)), 10)
                except grpc.aio.AioRpcError as e:
                    assert e.code() is grpc.StatusCode.UNIMPLEMENTED
                else:
                    raise AssertionError("Compact answered")
                # a method of no service at all
                unknown = channel.unary_unary("/nope.Nothing/Call")
                try:
                    await asyncio.wait_for(unknown(b""), 10)
                except grpc.aio.AioRpcError as e:
                    assert e.code() is grpc.StatusCode.UNIMPLEMENTED
                else:
                    raise AssertionError("an unknown method answered")
        finally:
            await server.stop(0)

    asyncio.run(body())
