"""A follower's forwarding stream to its leader: what a proposal in flight raises when
the stream fails. Found by CI (test_stream_fails_over_when_the_leader_is_killed, via a
follower): the leader was SIGKILLed, gRPC's core ended the follower's stream with
INTERNAL, and the follower passed INTERNAL to its client as the put's answer instead of
retrying it on the new leader. A fake stub stands in for the leader's end, so each
status is exact."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import grpc
import pytest

from coord.server.core.coordinator import Coordinator
from coord.server.core.forward import ProposeStream, _Unsupported, rpc_error
from coord.server.node.driver import NodeOptions
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.sm.results import PutResult, encode_result

S = grpc.StatusCode


class _EndingCall:
    """A ProposeStream call whose leader takes the first message, then the stream ends
    with `status` (as gRPC reports it to the reader)."""

    def __init__(self, status: grpc.aio.AioRpcError) -> None:
        self.status = status
        self.written = asyncio.Event()
        self.cancelled = False

    async def initial_metadata(self) -> tuple:
        return ()

    async def write(self, message) -> None:
        self.written.set()

    async def read(self):
        await self.written.wait()
        raise self.status

    def cancel(self) -> None:
        self.cancelled = True


class _Stub:
    def __init__(self, status: grpc.aio.AioRpcError) -> None:
        self.status = status
        self.calls: list[_EndingCall] = []

    def ProposeStream(self, metadata=()):  # noqa: N802 - the generated stub's name
        self.calls.append(_EndingCall(self.status))
        return self.calls[-1]


def _propose_through(status: grpc.aio.AioRpcError) -> BaseException:
    async def go() -> BaseException:
        stream = ProposeStream(_Stub(status), ())
        with pytest.raises(BaseException) as raised:
            await stream.propose(b"cmd", 2.0)
        return raised.value

    return asyncio.run(asyncio.wait_for(go(), 10))


@pytest.mark.parametrize("code,details", [
    (S.INTERNAL, "Internal error from Core"),  # the leader was killed mid-stream
    (S.CANCELLED, "cancelled by the member"),  # the leader stopped
])
def test_a_stream_that_broke_fails_its_proposals_unavailable(code, details):
    """UNAVAILABLE is what the coordinator retries on the next leader (a request id
    makes that safe); INTERNAL or CANCELLED would reach the client as the answer."""
    err = _propose_through(rpc_error(code, details))
    assert isinstance(err, grpc.aio.AioRpcError)
    assert err.code() == S.UNAVAILABLE
    assert code.name in err.details() and details in err.details()


def test_a_status_the_leader_sent_passes_through_unchanged():
    """A refusal of the whole stream (here the peer credentials) is the leader's answer,
    not a break: the caller sees it as a unary Propose would have raised it."""
    err = _propose_through(rpc_error(S.PERMISSION_DENIED, "not a member", "NOT_A_MEMBER"))
    assert isinstance(err, grpc.aio.AioRpcError) and err.code() == S.PERMISSION_DENIED
    # An INTERNAL with coord's reason was sent by the leader, not left by gRPC's core.
    err = _propose_through(rpc_error(S.INTERNAL, "disk gone", "EXPORT_FAILED"))
    assert isinstance(err, grpc.aio.AioRpcError) and err.code() == S.INTERNAL


def test_a_leader_without_the_stream_is_sent_unary_calls():
    err = _propose_through(rpc_error(S.UNIMPLEMENTED, "no ProposeStream"))
    assert isinstance(err, _Unsupported)


def test_the_coordinator_retries_a_proposal_whose_stream_broke():
    """End to end inside the member: a put forwarded on a stream that breaks with
    INTERNAL is proposed again (to whichever member leads then), and the caller gets
    the second attempt's answer, not INTERNAL."""
    class _Link:
        def __init__(self) -> None:
            self.attempts = 0
            killed = rpc_error(S.INTERNAL, "Internal error from Core")
            self.stream = ProposeStream(_Stub(killed), ())

        async def propose(self, leader, payload: bytes, timeout: float):
            self.attempts += 1
            if self.attempts == 1:
                return await self.stream.propose(payload, timeout)
            return encode_result(PutResult(revision=7)), 7

    node = SimpleNamespace(options=NodeOptions(), me=SimpleNamespace(name="n2"), term=1,
                           is_leader=False, leader=SimpleNamespace(peer_address="x"),
                           quorum_lost_for=lambda: 0.0)
    link = _Link()
    coord = Coordinator(node, CoordMachine(), link)
    result = asyncio.run(asyncio.wait_for(
        coord.write(c.Put(b"k", b"v", request_id="req-1"), timeout=3.0), 10))
    assert link.attempts == 2 and result.revision == 7
