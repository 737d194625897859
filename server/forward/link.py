"""A follower's side of forwarding: its channels to the leader's peer port, with the
cluster credentials (`LeaderLink`). Commands travel on one pipelined stream per
follower -> leader pair (`ProposeStream`), so what a follower's clients send together
reaches the leader's Raft log together; keepalives and TTL questions go in batches
(`session_asks`). The leader's refusal of a command comes back as the
`coord.wire.ApiError` it answered, and so does a stream that failed, for every command
in flight on it."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from coord.server.forward.session_asks import SessionAsks
from coord.server.node.members import MemberInfo
from coord.server.transport.auth import PeerAuth
from coord.server.transport.grpc_options import CHANNEL_OPTIONS
from coord.tagged_calls import TaggedCalls
from coord.tls.credentials import aio_channel
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc
from coord.wire import ApiError, stream_broke

ASK_TIMEOUT_S = 2.0  # a batch of keepalives; each asker gives up on its own sooner


def _unavailable(message: str) -> ApiError:
    """What fails the proposals in flight on a stream that ended: the coordinator retries
    them on the next leader under their request ids."""
    return ApiError(grpc.StatusCode.UNAVAILABLE, "", message)


def _deadline_error(timeout: float) -> ApiError:
    return ApiError(grpc.StatusCode.DEADLINE_EXCEEDED, "", f"no outcome within {timeout:.3g}s")


class ProposeStream:
    """A follower's pipelined stream of proposals to one leader, opened on first use
    and again after it fails. What fails it fails every proposal in flight on it with
    the stream's status; a stream that broke (the leader died or stopped:
    `coord.wire.stream_broke`) fails them with UNAVAILABLE, which the coordinator
    retries on the next leader under the request id."""

    def __init__(self, stub: coord_pb2_grpc.ForwardStub,
                 metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata
        self._calls: TaggedCalls[pb.ForwardProposal] = TaggedCalls()

    async def propose(self, payload: bytes, timeout: float) -> tuple[bytes, int]:
        """The leader's encoded result and log index; raises its ApiError."""
        if self._calls.stream is None:
            self._open()
        timeout_ms = max(1, int(timeout * 1000))
        return await self._calls.call(
            lambda tag: pb.ForwardProposal(id=tag, command=payload, timeout_ms=timeout_ms),
            timeout, _deadline_error)

    def _open(self) -> None:
        call = self._stub.ProposeStream(metadata=self._metadata)
        self._calls.opened(call, self._write(call), self._read(call))

    async def _write(self, call: Any) -> None:
        try:
            await call.initial_metadata()  # a write racing a refusal hides its status
            await self._calls.send_loop(
                lambda proposals: call.write(pb.ForwardProposals(proposals=proposals)))
        except (grpc.RpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            return  # the call ended: the reader reports its status

    async def _read(self, call: Any) -> None:
        settle = self._calls.settle
        try:
            while (message := await call.read()) is not grpc.aio.EOF:
                for outcome in message.outcomes:
                    if outcome.HasField("error"):
                        settle(outcome.id, error=ApiError.of_pb(outcome.error))
                    else:
                        settle(outcome.id, (outcome.result, outcome.index))
            error = _unavailable("the leader ended the stream")
        except grpc.aio.AioRpcError as e:
            error = ApiError.of_rpc_error(e)
            if stream_broke(error.code, error.reason):  # the leader died
                error = _unavailable(f"the stream to the leader broke ({error.code.name}: "
                                     f"{error.message})")
        except grpc.aio.UsageError:  # the channel was closed under us
            error = _unavailable("the link was closed")
        self._calls.ended(call, lambda: error)

    def close(self) -> None:
        if self._calls.stream is not None:
            self._calls.ended(self._calls.stream, lambda: _unavailable("link closed"))


class LeaderLink:
    """Cached channels to other members' peer ports, with the cluster credentials (and
    TLS's: `tls`, our peer certificate and the peer CA, with peer TLS)."""

    def __init__(self, auth: PeerAuth, tls: grpc.ChannelCredentials | None = None) -> None:
        self.auth = auth
        self.tls = tls
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._streams: dict[str, ProposeStream] = {}
        self._asks: dict[tuple[str, str], SessionAsks] = {}
        self.forwarded = 0  # proposals forwarded to a leader (the member's metrics)

    async def propose(self, leader: MemberInfo, payload: bytes,
                      timeout: float) -> tuple[bytes, int]:
        """Forward an encoded command to `leader`: its encoded result and log index.
        Raises the leader's answer, or the stream's failure, as an ApiError."""
        self.forwarded += 1
        stream = self._streams.get(leader.peer_address)
        if stream is None:
            stream = self._streams[leader.peer_address] = ProposeStream(
                self.stub(leader), self.metadata(leader))
        return await stream.propose(payload, timeout)

    def session_asks(self, leader: MemberInfo, method: str) -> SessionAsks:
        """The batcher of `method` ("KeepAlive" or "Remaining") calls to `leader`."""
        key = (leader.peer_address, method)
        asks = self._asks.get(key)
        if asks is None:
            async def call(session_ids: list[int]) -> list[int]:
                resp = await getattr(self.stub(leader), method)(
                    pb.ForwardKeepAliveRequest(session_ids=session_ids),
                    metadata=self.metadata(leader), timeout=ASK_TIMEOUT_S)
                return list(resp.ttl_ms)

            asks = self._asks[key] = SessionAsks(call)
        return asks

    async def describe(self, member: MemberInfo,
                       timeout: float) -> pb.ForwardDescribeResponse | None:
        """`member`'s answer to Describe over the peer port (None if it does not answer
        within `timeout`, or answers for another name)."""
        try:
            resp = await self.stub(member).Describe(
                pb.ForwardDescribeRequest(), metadata=self.metadata(member), timeout=timeout)
        except grpc.aio.AioRpcError:
            return None
        return resp if resp.name == member.name else None

    async def client_address(self, member: MemberInfo, timeout: float) -> str:
        """Where `member` serves clients ("" if it does not say: see `describe`)."""
        resp = await self.describe(member, timeout)
        return resp.client_address if resp is not None else ""

    def stub(self, member: MemberInfo) -> coord_pb2_grpc.ForwardStub:
        channel = self._channels.get(member.peer_address)
        if channel is None:
            channel = aio_channel(member.peer_address, self.tls, CHANNEL_OPTIONS)
            self._channels[member.peer_address] = channel
        return coord_pb2_grpc.ForwardStub(channel)

    def metadata(self, member: MemberInfo) -> tuple[tuple[str, str], ...]:
        return self.auth.metadata_for(member.id)

    async def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
        for asks in self._asks.values():
            await asks.close()
        self._asks.clear()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
