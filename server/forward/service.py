"""The leader's side of forwarding, served on its peer port to the other members only
(`auth`): the commands they forward on their pipelined streams (served by
`TaggedStream`, like the client API's stream) and their batched keepalives and TTL
questions. A refusal is answered in-band as the ApiError the API would answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import grpc

from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.transport.auth import PeerAuth
from coord.server.transport.tagged_stream import TaggedStream
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc
from coord.wire import ApiError

PROPOSE_TIMEOUT_S = 5.0


class SessionClock(Protocol):
    """The leader's session deadlines (the request path's session tracker): a session's
    TTL in ms once renewed, or its time left; -1 gone, None cannot tell yet."""

    def keepalive(self, session_id: int) -> int | None: ...

    def remaining(self, session_id: int) -> int | None: ...


class ForwardService(coord_pb2_grpc.ForwardServicer):
    """The leader's side: only members of this cluster may call (`auth`)."""

    def __init__(self, node: Node, tracker: SessionClock, auth: PeerAuth) -> None:
        self.node = node
        self.tracker = tracker
        self.auth = auth

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
            return pb.ForwardOutcome(id=p.id, error=e.as_api_error().as_pb())
        return pb.ForwardOutcome(id=p.id, result=applied.result.data, index=applied.index)

    async def KeepAlive(self, request, context):  # noqa: N802
        return await self._ask(request, context, self.tracker.keepalive)

    async def Remaining(self, request, context):  # noqa: N802
        return await self._ask(request, context, self.tracker.remaining)

    async def Describe(self, request, context):  # noqa: N802
        await self.auth.authenticate(context)
        me = self.node.me
        return pb.ForwardDescribeResponse(name=me.name, client_address=me.client_address)

    async def _ask(self, request: pb.ForwardKeepAliveRequest, context: Any,
                   answer: Callable[[int], int | None]) -> pb.ForwardKeepAliveResponse:
        await self.auth.authenticate(context)
        if not self.node.is_leader:
            await ApiError(grpc.StatusCode.FAILED_PRECONDITION, "NOT_LEADER",
                           "not the leader").abort(context)
        ttls = [answer(sid) for sid in request.session_ids]
        return pb.ForwardKeepAliveResponse(ttl_ms=[0 if t is None else t for t in ttls])


def _failed_outcome(tag: int, e: BaseException) -> pb.ForwardOutcome:
    return pb.ForwardOutcome(id=tag, error=ApiError(grpc.StatusCode.UNKNOWN, "", repr(e)).as_pb())
