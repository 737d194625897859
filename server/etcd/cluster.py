"""etcd's Cluster.MemberList, answered from this member's Raft view. Member ids are
coord's (stable hashes of member names); URLs are http:// plus the addresses coord knows
(a member's client address is known for the answering member and for members added
with one). Maintenance is in `maintenance`."""

from __future__ import annotations

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd.errors import etcd_call
from coord.server.requests.coordinator import Coordinator

VERSION = "3.4.0"  # the etcd API version served (clients read it as the server version)


def _url(address: str) -> list[str]:
    return [f"http://{address}"] if address else []


class EtcdClusterService(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    @etcd_call
    async def MemberList(self, request, context):  # noqa: N802
        node = self.coord.node
        learners = node.status().conf_state.learners
        out = pb.MemberListResponse(header=conv.header(self.coord))
        for mid, m in sorted(node.members.items(), key=lambda kv: kv[1].name):
            client = node.me.client_address if mid == node.me.id else m.client_address
            out.members.add(ID=mid, name=m.name, peerURLs=_url(m.peer_address),
                            clientURLs=_url(client), isLearner=mid in learners)
        return out
