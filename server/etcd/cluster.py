"""etcd's Cluster.MemberList, answered from this member's Raft view. Member ids are
coord's (stable hashes of member names); URLs are http:// plus the addresses coord knows.
A member's client address is in the replicated membership only when it was added with
one (--initial-cluster names peer addresses alone), so this member asks each other one
where it serves clients (the Forward service's Describe, over the peer port) and keeps
the answer: clients that sync their endpoints from MemberList (etcdctl's discovery, the
Go client's AutoSyncInterval) then find every member. A member that does not answer is
listed without client URLs, as etcd lists one that has not started. Maintenance is in
`maintenance`."""

from __future__ import annotations

import asyncio

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd.errors import etcd_call
from coord.server.node.members import MemberInfo
from coord.server.requests.coordinator import Coordinator

VERSION = "3.4.0"  # the etcd API version served (clients read it as the server version)
ASK_TIMEOUT_S = 0.5
"""How long MemberList waits for a member to say where it serves clients."""


def _url(address: str) -> list[str]:
    return [f"http://{address}"] if address else []


class EtcdClusterService(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self._told: dict[tuple[int, str], str] = {}  # (id, peer address) -> client address

    async def _client_addresses(self, members: dict[int, MemberInfo]) -> dict[int, str]:
        """Each member's client address: its own, the membership's, else asked of it."""
        node = self.coord.node
        out = {mid: node.me.client_address if mid == node.me.id else
               m.client_address or self._told.get((mid, m.peer_address), "")
               for mid, m in members.items()}
        unknown = [mid for mid, address in out.items() if not address]
        answers = await asyncio.gather(*(
            self.coord.link.client_address(members[mid], ASK_TIMEOUT_S) for mid in unknown))
        for mid, address in zip(unknown, answers, strict=True):
            if address:
                out[mid] = self._told[(mid, members[mid].peer_address)] = address
        return out

    @etcd_call
    async def MemberList(self, request, context):  # noqa: N802
        node = self.coord.node
        learners = node.status().conf_state.learners
        members = dict(node.members)
        clients = await self._client_addresses(members)
        out = pb.MemberListResponse(header=conv.header(self.coord))
        for mid, m in sorted(members.items(), key=lambda kv: kv[1].name):
            out.members.add(ID=mid, name=m.name, peerURLs=_url(m.peer_address),
                            clientURLs=_url(clients[mid]), isLearner=mid in learners)
        return out
