"""etcd's Cluster.MemberList and Maintenance (Status, Alarm, Defragment), answered from
this member's Raft view, state machine and store. Member ids are coord's (stable hashes
of member names); URLs are http:// plus the addresses coord knows (a member's client
address is known for the answering member and for members added with one)."""

from __future__ import annotations

import asyncio
import logging

import grpc

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.core.coordinator import Coordinator
from coord.server.etcd import convert as conv
from coord.server.etcd.errors import EtcdError, check, etcd_call
from coord.server.storage.log_store import LogStore, StorageError, StoreSpace
from coord.sm.alarms import ACTIVATE, DEACTIVATE
from coord.sm.commands import Alarm

log = logging.getLogger(__name__)

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
    """Status reports the member's store as etcd's dbSize (the file) and dbSizeInUse (its
    pages holding data), and active alarms as etcd's errors; Alarm reads and changes the
    replicated alarms; Defragment VACUUMs this member's store."""

    def __init__(self, coord: Coordinator, store: LogStore) -> None:
        self.coord = coord
        self.store = store

    @etcd_call
    async def Status(self, request, context):  # noqa: N802
        node = self.coord.node
        st = node.status()
        try:
            space = await asyncio.to_thread(self.store.space)
        except StorageError:
            space = StoreSpace(0, 0)
        return pb.StatusResponse(
            header=conv.header(self.coord),
            version=VERSION,
            dbSize=space.file_bytes,
            dbSizeInUse=space.used_bytes,
            leader=st.leader,
            raftIndex=st.commit,
            raftTerm=st.term,
            raftAppliedIndex=node.applied_index,
            errors=[f"memberID:{m} alarm:{k} " for m, k in self.coord.machine.alarms.active()],
            isLearner=node.me.id in st.conf_state.learners,
        )

    @etcd_call
    async def Alarm(self, request, context):  # noqa: N802
        """GET lists the alarms (one kind, or all for NONE); ACTIVATE / DEACTIVATE go
        through the log like any change. etcd's disarm of member 0 lowers them all."""
        kind = pb.AlarmType.Name(request.alarm)
        if request.action != pb.AlarmRequest.GET:
            if kind == "NONE" and request.action == pb.AlarmRequest.DEACTIVATE:
                kind = "NOSPACE"  # the one kind coord raises
            action = ACTIVATE if request.action == pb.AlarmRequest.ACTIVATE else DEACTIVATE
            if kind not in ("NOSPACE",):
                raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT,
                                f"etcdserver: alarm {kind} is not one coord raises")
            check(await self.coord.write(Alarm(action, request.memberID, kind),
                                         local_apply=True))
        out = pb.AlarmResponse(header=conv.header(self.coord))
        for member_id, active in self.coord.machine.alarms.active():
            if request.action == pb.AlarmRequest.GET and kind not in ("NONE", active):
                continue
            out.alarms.add(memberID=member_id, alarm=pb.AlarmType.Value(active))
        return out

    @etcd_call
    async def Defragment(self, request, context):  # noqa: N802
        try:
            before, after = await asyncio.to_thread(self.store.defrag)
        except StorageError as e:
            raise EtcdError(grpc.StatusCode.INTERNAL, f"etcdserver: {e}") from None
        log.info("%s: defragmented its store: %d -> %d bytes on disk",
                 self.coord.node.me.name, before.file_bytes, after.file_bytes)
        return pb.DefragmentResponse(header=conv.header(self.coord))
