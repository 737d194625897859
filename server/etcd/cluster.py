"""etcd's Cluster.MemberList and Maintenance.Status, answered from this member's Raft
view. Member ids are coord's (stable hashes of member names); URLs are http:// plus
the addresses coord knows (a member's client address is known for the answering
member and for members added with one)."""

from __future__ import annotations

import os

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.core.coordinator import Coordinator
from coord.server.etcd import convert as conv
from coord.server.etcd.errors import etcd_call
from coord.server.storage.log_store import LogStore

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


class EtcdMaintenanceService(rpc_pb2_grpc.MaintenanceServicer):
    """Status reports the size of the member's log store as etcd's dbSize."""

    def __init__(self, coord: Coordinator, store: LogStore) -> None:
        self.coord = coord
        self.store = store

    @etcd_call
    async def Status(self, request, context):  # noqa: N802
        node = self.coord.node
        st = node.status()
        try:
            db_size = os.path.getsize(self.store.path)
        except OSError:
            db_size = 0
        return pb.StatusResponse(
            header=conv.header(self.coord),
            version=VERSION,
            dbSize=db_size,
            dbSizeInUse=db_size,
            leader=st.leader,
            raftIndex=st.commit,
            raftTerm=st.term,
            raftAppliedIndex=node.applied_index,
            isLearner=node.me.id in st.conf_state.learners,
        )
