"""`Registrar`: services added through it are served by their generic handlers, and only
the methods it names keep the registered-method copy generated code adds; they answer as
before."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.server.member import OWN_REQUEST_METHODS
from coord.server.transport.grpc_options import EXCLUSIVE_BIND, Registrar
from coord.testing.local_cluster import cluster
from coord.v1 import coord_pb2, coord_pb2_grpc


class _Recording:
    """Stands in for a gRPC server: records what is added to it."""

    def __init__(self) -> None:
        self.generic: list = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.registered += [f"/{service}/{name}" for name in handlers]


class _KV(erpc.KVServicer):
    async def Put(self, request, context):  # noqa: N802
        return epb.PutResponse(header=epb.ResponseHeader(revision=7))


def test_only_the_methods_it_names_are_registered():
    direct, through = _Recording(), _Recording()
    named = ["/etcdserverpb.KV/Put", "/etcdserverpb.KV/Range"]
    for server in (direct, Registrar(through, named)):  # type: ignore[arg-type]
        erpc.add_KVServicer_to_server(_KV(), server)
        erpc.add_LeaseServicer_to_server(erpc.LeaseServicer(), server)
    # generated code adds both copies of every method; through Registrar the generic
    # ones all arrive, and the registered copy only of the methods named
    assert "/etcdserverpb.KV/Compact" in direct.registered
    assert "/etcdserverpb.Lease/LeaseGrant" in direct.registered
    assert len(direct.generic) == 2
    assert sorted(through.registered) == sorted(named) and len(through.generic) == 2


def test_a_member_registers_the_etcd_apis_reads_and_writes_alone():
    """Each registered method is a pending request every admitted call pays for
    (`Registrar`): a member keeps them to the etcd API's per-operation calls."""
    assert sorted(OWN_REQUEST_METHODS) == ["/etcdserverpb.KV/DeleteRange",
                                           "/etcdserverpb.KV/Put", "/etcdserverpb.KV/Range",
                                           "/etcdserverpb.KV/Txn"]


@pytest.mark.parametrize("registered", [(), ("/etcdserverpb.KV/Put",)])
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


def test_a_member_serves_reflection_health_and_both_apis_through_it():
    """A member adds every service through a Registrar (only the etcd API's reads and
    writes registered): reflection lists them all, and a registered and a generic method both
    answer, as grpcurl and etcd's clients expect."""
    with cluster(members=1, in_process=True) as c:
        address = next(iter(c.members.values())).listen
        with grpc.insecure_channel(address) as channel:
            ask = reflection_pb2.ServerReflectionRequest(list_services="")
            [answer] = list(reflection_pb2_grpc.ServerReflectionStub(channel)
                            .ServerReflectionInfo(iter([ask]), timeout=10))
            listed = {s.name for s in answer.list_services_response.service}
            assert {"etcdserverpb.KV", "etcdserverpb.Lease", "etcdserverpb.Watch",
                    "coord.v1.KV", "coord.v1.Admin", "grpc.health.v1.Health",
                    "grpc.reflection.v1alpha.ServerReflection"} <= listed
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            put = erpc.KVStub(channel).Put(epb.PutRequest(key=b"k", value=b"v"), timeout=10)
            got = coord_pb2_grpc.KVStub(channel).Range(coord_pb2.RangeRequest(key=b"k"),
                                                       timeout=10)
            assert [kv.value for kv in got.kvs] == [b"v"]
            assert got.header.revision >= put.header.revision
