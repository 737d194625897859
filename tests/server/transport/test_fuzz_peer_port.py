"""Hostile input on a real member's peer port, from a stranger (no cluster secret): raw
bytes, Raft connections whose frames are generated (hellos with made-up credentials,
batches before any hello, unknown kinds, lengths that lie, frames past a hello's size),
HTTP/2 that goes wrong after its preface, and generated requests and malformed bytes on
each method of the Forward service (gRPC through the same port), with and without
made-up credentials. None may be accepted; every refusal must decode; the member must go
on serving its clients and leading its cluster of one."""

from __future__ import annotations

import socket
import time

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coord.server.transport.auth import MD_AUTH, MD_CLUSTER, MD_FROM
from coord.server.transport.frames import HEADER, PREAMBLE, FrameReader, Kind
from coord.server.transport.listener import H2_PREFACE
from coord.v1 import coord_pb2, raft_pb2
from tests.server import fuzzing
from tests.server.fuzzing import FUZZ_SETTINGS, SURVIVED, Method, check_answer

pytestmark = pytest.mark.cluster

API = "peer port"
FORWARD = fuzzing.methods(coord_pb2.DESCRIPTOR, skip=[
    s for s in coord_pb2.DESCRIPTOR.services_by_name if s != "Forward"])
READ_S = 0.5
"""How long the member has to answer or close; a connection it leaves open (waiting for
the rest of a frame that lied about its length) is closed by us then."""
REFUSALS = {"UNAUTHENTICATED", "INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAVAILABLE"}


@pytest.fixture(scope="module")
def member(tmp_path_factory):
    yield from fuzzing.running_member(tmp_path_factory.mktemp("fuzz-peer"), API,
                                      peer_port=True)


_KINDS = st.one_of(st.sampled_from(list(Kind)), st.sampled_from([0, 7, 99, 255]))


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One frame whose header may lie about its payload's length."""
    kind = draw(_KINDS)
    payload = draw(st.one_of(
        st.binary(max_size=64),
        fuzzing.messages(raft_pb2.PeerHello.DESCRIPTOR).map(lambda m: m.SerializeToString()),
        fuzzing.messages(raft_pb2.MessageBatch.DESCRIPTOR, depth=1)
        .map(lambda m: m.SerializeToString()),
        st.sampled_from([4097, 70_000]).map(b"p".__mul__),
    ))
    length = draw(st.one_of(st.just(len(payload)), st.integers(0, (1 << 32) - 1),
                            st.sampled_from([4096, 4097, 300 * 1024 * 1024 + 1])))
    return HEADER.pack(length, kind) + payload


@st.composite
def connections(draw: st.DrawFn) -> tuple[bool, bytes]:
    """(whether it speaks Raft, the bytes a stranger sends on its connection)."""
    opening = draw(st.sampled_from(["raft", "raft", "raft", "partial", "garbage", "h2"]))
    if opening == "raft":
        return True, PREAMBLE + b"".join(draw(st.lists(frames(), min_size=1, max_size=4)))
    if opening == "partial":
        return False, PREAMBLE[:draw(st.integers(1, len(PREAMBLE) - 1))]
    if opening == "h2":
        return False, H2_PREFACE + draw(st.binary(min_size=1, max_size=256))
    return False, draw(st.binary(min_size=1, max_size=256))


def _exchange(address: str, data: bytes) -> bytes:
    """Send `data` and return what came back within READ_S (or until closed)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=READ_S) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return b""  # closed by the member before it had everything: a refusal
        got = bytearray()
        deadline = time.monotonic() + READ_S
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            got += chunk
        return bytes(got)


@FUZZ_SETTINGS
@given(connections())
def test_a_strangers_connection_is_never_accepted(member, connection) -> None:
    raft, data = connection
    answer = _exchange(member.cluster.members["n1"].peer_listen, data)
    if raft:
        answered = FrameReader().feed(answer)
        assert Kind.ACCEPT not in [k for k, _ in answered], answered
        for kind, payload in answered:
            assert kind in (Kind.REFUSE, Kind.PONG), answered
            if kind == Kind.REFUSE:
                assert raft_pb2.PeerRefusal.FromString(payload).code in REFUSALS
    assert member.probe.serving()
    assert member.cluster.status("n1").role == "leader"
    SURVIVED[API] += 1


_CREDENTIALS = st.lists(st.tuples(st.sampled_from([MD_FROM, MD_CLUSTER, MD_AUTH]),
                                  st.text("0123456789abcdef", max_size=64)), max_size=3)


@pytest.mark.parametrize("method", FORWARD, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_the_forward_service_refuses_strangers(member, method: Method, data) -> None:
    requests = data.draw(fuzzing.requests_for(method), label="requests")
    metadata = tuple(data.draw(_CREDENTIALS, label="metadata"))
    # A stranger's stream is refused, not left open: it must end by itself.
    outcome = check_answer(member, method, [r.SerializeToString() for r in requests], metadata,
                           timeout=fuzzing.UNARY_TIMEOUT_S)
    assert outcome.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED,
                            grpc.StatusCode.RESOURCE_EXHAUSTED), outcome


@pytest.mark.parametrize("method", FORWARD, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_the_forward_service_answers_malformed_bytes_clearly(member, method: Method,
                                                             data) -> None:
    fuzzing.send_malformed(member, method, data)
