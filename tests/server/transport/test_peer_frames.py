"""coord.server.transport.frames and the peer port's sorting of connections
(coord.server.transport.listener), over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from coord.server.transport.auth import PeerAuth
from coord.server.transport.frames import (
    HEADER,
    MAX_HELLO_PAYLOAD,
    MAX_PAYLOAD,
    PREAMBLE,
    FrameError,
    FrameReader,
    Kind,
    frame,
)
from coord.server.transport.listener import PeerPort
from coord.server.transport.peer import PeerTransport
from coord.v1 import raft_pb2

TEST_TIMEOUT = 30.0


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, TEST_TIMEOUT))


def test_frames_come_out_whole_whatever_the_pieces() -> None:
    rng = random.Random(7)
    sent = [(Kind.BATCH, rng.randbytes(rng.randrange(0, 3000))) for _ in range(200)]
    sent += [(Kind.PING, b""), (Kind.PONG, b"")]
    stream = b"".join(frame(k, p) for k, p in sent)
    for _ in range(20):
        reader, got, pos = FrameReader(), [], 0
        while pos < len(stream):
            step = rng.choice((1, 2, 5, 7, 100, 4096))
            got += reader.feed(stream[pos:pos + step])
            pos += step
        assert got == [(int(k), p) for k, p in sent]
        assert reader.pending == 0


def test_a_frame_over_the_limit_or_of_no_known_kind_is_refused() -> None:
    with pytest.raises(FrameError, match="over the"):
        FrameReader().feed(HEADER.pack(MAX_PAYLOAD + 1, Kind.BATCH))
    with pytest.raises(FrameError, match="unknown frame kind 99"):
        FrameReader().feed(HEADER.pack(0, 99))
    # A header alone is not a frame yet.
    reader = FrameReader()
    assert reader.feed(HEADER.pack(10, Kind.BATCH)) == []
    assert reader.pending == HEADER.size


def test_the_preamble_is_not_http2() -> None:
    assert not PREAMBLE.startswith(b"PRI ")


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), 10)


def test_the_peer_port_passes_grpc_through_and_closes_anything_else() -> None:
    """gRPC calls to the peer address reach the member's peer gRPC server (here a health
    service); a connection that is neither Raft nor gRPC is closed without an answer."""

    async def main() -> None:
        inner = grpc.aio.server()
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, inner)
        inner_port = inner.add_insecure_port("127.0.0.1:0")
        await inner.start()
        transport = PeerTransport(PeerAuth(1, b"secret", 5))
        port = PeerPort(transport, ("127.0.0.1", inner_port))
        bound = await port.start("127.0.0.1:0")
        try:
            await servicer.set("x", health_pb2.HealthCheckResponse.SERVING)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{bound}") as ch:
                stub = health_pb2_grpc.HealthStub(ch)
                for _ in range(3):
                    got = await stub.Check(health_pb2.HealthCheckRequest(service="x"), timeout=5)
                    assert got.status == health_pb2.HealthCheckResponse.SERVING
                # A big answer goes through whole (flow control on both sides).
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Check(health_pb2.HealthCheckRequest(service="y" * 500_000),
                                     timeout=5)
                assert err.value.code() == grpc.StatusCode.NOT_FOUND

            reader, writer = await asyncio.open_connection("127.0.0.1", bound)
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
            assert await _read_all(reader) == b""
            writer.close()
            # Without a gRPC server to pass to, gRPC is closed too.
            bare = PeerPort(transport, None)
            bare_port = await bare.start("127.0.0.1:0")
            reader, writer = await asyncio.open_connection("127.0.0.1", bare_port)
            writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            assert await _read_all(reader) == b""
            writer.close()
            await bare.close()
        finally:
            await port.close()
            await transport.close()
            await inner.stop(0)

    run(main())


def test_a_taken_peer_port_is_an_error_naming_the_flag() -> None:
    async def main() -> None:
        transport = PeerTransport(PeerAuth(1, b"secret", 5))
        first = PeerPort(transport, None)
        bound = await first.start("127.0.0.1:0")
        try:
            taken = rf"cannot listen on 127.0.0.1:{bound} \(--peer-listen\)"
            with pytest.raises(OSError, match=taken):
                await PeerPort(transport, None).start(f"127.0.0.1:{bound}")
        finally:
            await first.close()

    run(main())


def test_a_raft_connection_that_breaks_the_format_is_refused_with_the_reason() -> None:
    """A frame over the size limit, after a valid preamble: the listener answers with a
    refusal that says why and closes, and nothing reaches the receiver."""

    async def main() -> None:
        transport = PeerTransport(PeerAuth(1, b"secret", 5))
        got: list = []
        transport.receive_with(got.extend)
        port = PeerPort(transport, None)
        bound = await port.start("127.0.0.1:0")
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", bound)
            writer.write(PREAMBLE + HEADER.pack(MAX_PAYLOAD + 1, Kind.BATCH))
            answer = await _read_all(reader)
            writer.close()
            ((kind, payload),) = FrameReader().feed(answer)
            assert kind == Kind.REFUSE
            why = raft_pb2.PeerRefusal.FromString(payload)
            assert why.code == "INVALID_ARGUMENT" and "over the" in why.details
            assert got == [] and transport.inbox.dropped == 1
        finally:
            await port.close()
            await transport.close()

    run(main())


def test_a_stranger_is_refused_a_frame_past_a_hellos_size_before_sending_it() -> None:
    """Before its hello is accepted, a connection's frames may be MAX_HELLO_PAYLOAD bytes:
    one announcing more is refused from its header alone, not buffered first."""

    async def main() -> None:
        transport = PeerTransport(PeerAuth(1, b"secret", 5))
        port = PeerPort(transport, None)
        bound = await port.start("127.0.0.1:0")
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", bound)
            writer.write(PREAMBLE + HEADER.pack(MAX_HELLO_PAYLOAD + 1, Kind.HELLO) + b"h" * 100)
            answer = await _read_all(reader)
            writer.close()
            ((kind, payload),) = FrameReader().feed(answer)
            why = raft_pb2.PeerRefusal.FromString(payload)
            assert (kind, why.code) == (Kind.REFUSE, "INVALID_ARGUMENT")
            assert f"over the {MAX_HELLO_PAYLOAD} limit" in why.details
        finally:
            await port.close()
            await transport.close()

    run(main())


def test_a_reader_takes_frames_up_to_its_limit_then_trusted_up_to_max_payload() -> None:
    reader = FrameReader.for_stranger()
    assert reader.feed(frame(Kind.HELLO, b"h" * MAX_HELLO_PAYLOAD)) == \
        [(Kind.HELLO, b"h" * MAX_HELLO_PAYLOAD)]
    with pytest.raises(FrameError, match="over the"):
        FrameReader.for_stranger().feed(HEADER.pack(MAX_HELLO_PAYLOAD + 1, Kind.BATCH))
    reader.trust()
    assert reader.feed(HEADER.pack(MAX_PAYLOAD, Kind.BATCH)) == []
