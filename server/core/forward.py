"""Member-to-member forwarding over the peer port: a follower hands an encoded command
(or a batch of keepalives) to the leader, so clients never have to find the leader.
Commands travel on one pipelined stream per follower -> leader pair (`ProposeStream`,
served by `TaggedStream` like the client API's stream), so what a follower's clients
send together reaches the leader's Raft log together; a leader without it (an older
coord) gets unary `Propose` calls."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from coord.server.api.errors import ApiError, abort, abort_node_error, status_for
from coord.server.core.session_asks import SessionAsks
from coord.server.core.session_tracker import SessionTracker
from coord.server.core.tagged_stream import TaggedStream
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.node.members import MemberInfo
from coord.server.transport.auth import PeerAuth
from coord.server.transport.grpc_options import CHANNEL_OPTIONS
from coord.tagged_calls import TaggedCalls
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc
from coord.wire import stream_broke

PROPOSE_TIMEOUT_S = 5.0
ASK_TIMEOUT_S = 2.0  # a batch of keepalives; each asker gives up on its own sooner


class ForwardService(coord_pb2_grpc.ForwardServicer):
    """The leader's side: only members of this cluster may call (`auth`)."""

    def __init__(self, node: Node, tracker: SessionTracker, auth: PeerAuth) -> None:
        self.node = node
        self.tracker = tracker
        self.auth = auth

    async def Propose(self, request, context):  # noqa: N802
        await self.auth.authenticate(context)
        try:
            applied = await self.node.propose(request.command)
        except NodeError as e:
            await abort_node_error(context, e)
        return pb.ForwardResponse(result=applied.result, index=applied.index, term=applied.term)

    async def ProposeStream(self, request_iterator, context):  # noqa: N802
        """Propose, pipelined: every proposal of a message is proposed in one loop turn
        (one Raft batch); outcomes go back as they commit, those that commit together in
        one message."""
        await self.auth.authenticate(context)
        await context.send_initial_metadata(())  # the follower writes once it has these

        async def send(outcomes: list[pb.ForwardOutcome]) -> None:
            await context.write(pb.ForwardOutcomes(outcomes=outcomes))

        stream = TaggedStream(send, _failed_outcome)

        def take(request: pb.ForwardProposals) -> None:
            for p in request.proposals:
                if p.id not in stream.in_flight:  # a repeated id is the follower's bug
                    stream.start(p.id, self._outcome(p))

        await stream.run(request_iterator, take)

    async def _outcome(self, p: pb.ForwardProposal) -> pb.ForwardOutcome:
        timeout = p.timeout_ms / 1000 if p.timeout_ms > 0 else PROPOSE_TIMEOUT_S
        try:
            applied = await self.node.propose(p.command, timeout)
        except NodeError as e:
            return pb.ForwardOutcome(id=p.id, error=ApiError.of_node_error(e).as_pb())
        return pb.ForwardOutcome(id=p.id, result=applied.result, index=applied.index,
                                 term=applied.term)

    async def KeepAlive(self, request, context):  # noqa: N802
        await self.auth.authenticate(context)
        if not self.node.is_leader:
            await abort(
                context, grpc.StatusCode.FAILED_PRECONDITION, "NOT_LEADER", "not the leader"
            )
        ttls = [self.tracker.keepalive(sid) for sid in request.session_ids]
        return pb.ForwardKeepAliveResponse(ttl_ms=[0 if t is None else t for t in ttls])

    async def Remaining(self, request, context):  # noqa: N802
        await self.auth.authenticate(context)
        if not self.node.is_leader:
            await abort(
                context, grpc.StatusCode.FAILED_PRECONDITION, "NOT_LEADER", "not the leader"
            )
        ttls = [self.tracker.remaining(sid) for sid in request.session_ids]
        return pb.ForwardKeepAliveResponse(ttl_ms=[0 if t is None else t for t in ttls])


def _failed_outcome(tag: int, e: BaseException) -> pb.ForwardOutcome:
    err = ApiError(grpc.StatusCode.UNKNOWN, "", repr(e))
    return pb.ForwardOutcome(id=tag, error=err.as_pb())


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def rpc_error(code: grpc.StatusCode, message: str, reason: str = "",
              metadata: dict[str, str] | None = None) -> grpc.aio.AioRpcError:
    """The error a unary Propose would have raised: a status with the ErrorInfo, so the
    coordinator reads a pipelined outcome exactly as it reads a unary call's."""
    trailing = grpc.aio.Metadata()
    if reason:
        trailing = grpc.aio.Metadata(*status_for(code, reason, message, metadata)
                                     .trailing_metadata)
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=message)


class _Unsupported(Exception):
    """The leader has no ProposeStream (an older coord): use unary Propose."""


def _deadline_error(timeout: float) -> grpc.aio.AioRpcError:
    return rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, f"no outcome within {timeout:.3g}s")


class ProposeStream:
    """A follower's pipelined stream of proposals to one leader, opened on first use
    and again after it fails. What fails it fails every proposal in flight on it with
    the stream's status, as a unary call would; a stream that broke (the leader died
    or stopped: `coord.wire.stream_broke`) fails them with UNAVAILABLE, which the
    coordinator retries on the next leader under the request id."""

    def __init__(self, stub: coord_pb2_grpc.ForwardStub,
                 metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata
        self._call: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._calls: TaggedCalls[pb.ForwardProposal] = TaggedCalls()
        self.unsupported = False

    async def propose(self, payload: bytes, timeout: float) -> tuple[bytes, int]:
        if self.unsupported:
            raise _Unsupported
        if self._call is None:
            self._open()
        timeout_ms = max(1, int(timeout * 1000))
        return await self._calls.call(
            lambda tag: pb.ForwardProposal(id=tag, command=payload, timeout_ms=timeout_ms),
            timeout, _deadline_error)

    def _open(self) -> None:
        self._call = call = self._stub.ProposeStream(metadata=self._metadata)
        self._tasks = [asyncio.ensure_future(self._write(call)),
                       asyncio.ensure_future(self._read(call))]

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
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    raise rpc_error(grpc.StatusCode.UNAVAILABLE, "the leader ended the stream")
                for outcome in message.outcomes:
                    if outcome.HasField("error"):
                        e = outcome.error
                        code = _CODES.get(e.code, grpc.StatusCode.UNKNOWN)
                        settle(outcome.id, error=rpc_error(code, e.message, e.reason,
                                                           dict(e.metadata)))
                    else:
                        settle(outcome.id, (outcome.result, outcome.index))
        except grpc.aio.AioRpcError as e:
            if stream_broke(e.code(), ApiError.of_rpc_error(e).reason):  # the leader died
                e = rpc_error(grpc.StatusCode.UNAVAILABLE, f"the stream to the leader broke "
                              f"({e.code().name}: {e.details()})")
            self._broken(call, e)
        except grpc.aio.UsageError:  # the channel was closed under us
            self._broken(call, rpc_error(grpc.StatusCode.UNAVAILABLE, "the link was closed"))

    def _broken(self, call: Any, e: grpc.aio.AioRpcError) -> None:
        if self._call is not call:
            return
        self._call = None
        call.cancel()
        self.unsupported = e.code() == grpc.StatusCode.UNIMPLEMENTED
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks = []
        self._calls.fail_all(_Unsupported if self.unsupported else lambda: e)

    def close(self) -> None:
        if self._call is not None:
            self._broken(self._call, rpc_error(grpc.StatusCode.UNAVAILABLE, "link closed"))


class LeaderLink:
    """Cached channels to other members' peer ports, with the cluster credentials."""

    def __init__(self, auth: PeerAuth) -> None:
        self.auth = auth
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._streams: dict[str, ProposeStream] = {}
        self._asks: dict[tuple[str, str], SessionAsks] = {}

    async def propose(self, leader: MemberInfo, payload: bytes,
                      timeout: float) -> tuple[bytes, int]:
        """Forward an encoded command to `leader`: its encoded result and log index.
        Raises grpc.aio.AioRpcError as a unary Propose would (the leader's status)."""
        stream = self._streams.get(leader.peer_address)
        if stream is None:
            stream = self._streams[leader.peer_address] = ProposeStream(
                self.stub(leader), self.metadata(leader))
        try:
            return await stream.propose(payload, timeout)
        except _Unsupported:
            pass
        resp = await self.stub(leader).Propose(
            pb.ForwardRequest(command=payload), metadata=self.metadata(leader), timeout=timeout)
        return resp.result, resp.index

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

    def stub(self, member: MemberInfo) -> coord_pb2_grpc.ForwardStub:
        channel = self._channels.get(member.peer_address)
        if channel is None:
            channel = grpc.aio.insecure_channel(member.peer_address, options=CHANNEL_OPTIONS)
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
