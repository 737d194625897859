"""A follower's forwarding stream to its leader: what a proposal in flight raises when
the leader refuses it or the stream fails. Found by CI (test_stream_fails_over_when_the_
leader_is_killed, via a follower): the leader was SIGKILLed, gRPC's core ended the
follower's stream with INTERNAL, and the follower passed INTERNAL to its client as the
put's answer instead of retrying it on the new leader. A fake stub stands in for the
leader's end, so each status is exact; the leader's refusal is made by the real leader
side (`ForwardService`), and reaches the API as the very value the follower read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import grpc
import pytest

from coord.server.api.common import Caller, commit
from coord.server.forward.link import ProposeStream
from coord.server.forward.service import ForwardService
from coord.server.node.driver import NodeOptions
from coord.server.node.errors import NotLeader
from coord.server.node.members import MemberInfo
from coord.server.requests.coordinator import Coordinator
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.sm.results import PutResult, encode_result
from coord.v1 import coord_pb2 as pb
from coord.wire import ApiError

S = grpc.StatusCode

Answer = Callable[[pb.ForwardProposals], Awaitable[pb.ForwardOutcomes]]


def ended(code: grpc.StatusCode, details: str, reason: str = "") -> grpc.aio.AioRpcError:
    """How gRPC reports a stream's end to its reader: the status, its ErrorInfo in the
    trailing metadata when the far end sent one (coord's `reason`)."""
    trailing = grpc.aio.Metadata()
    if reason:
        trailing = grpc.aio.Metadata(*ApiError(code, reason, details).status().trailing_metadata)
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=details)


class _Call:
    """A ProposeStream call: each message the follower writes is answered by `answer`,
    or the stream ends with `status` once the first message arrived."""

    def __init__(self, answer: Answer | None, status: grpc.aio.AioRpcError | None) -> None:
        self.answer, self.status = answer, status
        self.written: asyncio.Queue[pb.ForwardProposals] = asyncio.Queue()

    async def initial_metadata(self) -> tuple:
        return ()

    async def write(self, message: pb.ForwardProposals) -> None:
        self.written.put_nowait(message)

    async def read(self) -> pb.ForwardOutcomes:
        message = await self.written.get()
        if self.answer is None:
            raise self.status
        return await self.answer(message)

    def cancel(self) -> None:
        pass


class _Stub:
    def __init__(self, answer: Answer | None = None,
                 status: grpc.aio.AioRpcError | None = None) -> None:
        self.answer, self.status = answer, status

    def ProposeStream(self, metadata=()):  # noqa: N802 - the generated stub's name
        return _Call(self.answer, self.status)


def _propose_through(stub: _Stub) -> BaseException:
    async def go() -> BaseException:
        stream = ProposeStream(stub, ())
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
    err = _propose_through(_Stub(status=ended(code, details)))
    assert isinstance(err, ApiError) and err.code == S.UNAVAILABLE
    assert code.name in err.message and details in err.message


def test_a_status_the_leader_sent_passes_through_unchanged():
    """A refusal of the whole stream (here the peer credentials) is the leader's answer,
    not a break: the caller gets its code, reason and message."""
    err = _propose_through(_Stub(status=ended(S.PERMISSION_DENIED, "not a member",
                                              "NOT_A_MEMBER")))
    assert isinstance(err, ApiError)
    assert (err.code, err.reason, err.message) == (S.PERMISSION_DENIED, "NOT_A_MEMBER",
                                                   "not a member")
    # An INTERNAL with coord's reason was sent by the leader, not left by gRPC's core.
    err = _propose_through(_Stub(status=ended(S.INTERNAL, "disk gone", "EXPORT_FAILED")))
    assert isinstance(err, ApiError) and err.code == S.INTERNAL


def _leader_refusing(refusal: Exception) -> Answer:
    """The real leader side, over a node whose proposals fail with `refusal`."""

    class _Node:
        async def propose(self, command: bytes, timeout: float) -> None:
            raise refusal

    service = ForwardService(_Node(), tracker=None, auth=None)

    async def answer(message: pb.ForwardProposals) -> pb.ForwardOutcomes:
        outcomes = [await service._outcome(p) for p in message.proposals]
        return pb.ForwardOutcomes(outcomes=outcomes)

    return answer


def test_a_refusal_the_leader_answered_in_band_is_its_error_exactly():
    """NotLeader on the leader: the follower's proposal raises the same code, reason,
    message and leader hint the leader's API would have answered."""
    refusal = NotLeader(MemberInfo("n1", "127.0.0.1:7001"))
    sent = refusal.as_api_error()
    err = _propose_through(_Stub(_leader_refusing(refusal)))
    assert isinstance(err, ApiError)
    assert (err.code, err.reason, err.message, err.metadata) == (
        sent.code, sent.reason, sent.message, sent.metadata)
    assert err.metadata == {"leader": "n1", "leader_peer_address": "127.0.0.1:7001"}


def _follower(link: object) -> Coordinator:
    node = SimpleNamespace(options=NodeOptions(), me=SimpleNamespace(name="n2"), term=1,
                           is_leader=False, leader=SimpleNamespace(peer_address="x"),
                           quorum_lost_for=lambda: 0.0)
    return Coordinator(node, CoordMachine(), link)


def test_the_leaders_error_is_the_apis_answer():
    """A command that is not safe to retry (no request id) and that the leader refused
    reaches the API as the ApiError the follower read: not re-wrapped on the way."""
    refused = ApiError(S.UNAVAILABLE, "PROPOSAL_LOST", "entry 9 was replaced", {"k": "v"})

    class _Link:
        async def propose(self, leader, payload: bytes, timeout: float):
            raise refused

    coord = _follower(_Link())
    with pytest.raises(ApiError) as raised:
        asyncio.run(asyncio.wait_for(
            commit(coord, Caller(2.0), c.ExpireSessions((1,))), 10))
    assert raised.value is refused


def test_the_coordinator_retries_a_proposal_whose_stream_broke():
    """End to end inside the member: a put forwarded on a stream that breaks with
    INTERNAL is proposed again (to whichever member leads then), and the caller gets
    the second attempt's answer, not INTERNAL."""
    class _Link:
        def __init__(self) -> None:
            self.attempts = 0
            killed = ended(S.INTERNAL, "Internal error from Core")
            self.stream = ProposeStream(_Stub(status=killed), ())

        async def propose(self, leader, payload: bytes, timeout: float):
            self.attempts += 1
            if self.attempts == 1:
                return await self.stream.propose(payload, timeout)
            return encode_result(PutResult(revision=7)), 7

    link = _Link()
    result = asyncio.run(asyncio.wait_for(
        _follower(link).write(c.Put(b"k", b"v", request_id="req-1"), timeout=3.0), 10))
    assert link.attempts == 2 and result.revision == 7
