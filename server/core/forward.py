"""Member-to-member forwarding over the peer port: a follower hands an encoded command
(or a batch of keepalives) to the leader, so clients never have to find the leader."""

from __future__ import annotations

import grpc

from coord.server.api.errors import abort, abort_node_error
from coord.server.core.session_tracker import SessionTracker
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.node.members import MemberInfo
from coord.server.transport.auth import PeerAuth
from coord.server.transport.peer import CHANNEL_OPTIONS
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc


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


class LeaderLink:
    """Cached channels to other members' peer ports, with the cluster credentials."""

    def __init__(self, auth: PeerAuth) -> None:
        self.auth = auth
        self._channels: dict[str, grpc.aio.Channel] = {}

    def stub(self, member: MemberInfo) -> coord_pb2_grpc.ForwardStub:
        channel = self._channels.get(member.peer_address)
        if channel is None:
            channel = grpc.aio.insecure_channel(member.peer_address, options=CHANNEL_OPTIONS)
            self._channels[member.peer_address] = channel
        return coord_pb2_grpc.ForwardStub(channel)

    def metadata(self, member: MemberInfo) -> tuple[tuple[str, str], ...]:
        return self.auth.metadata_for(member.id)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
