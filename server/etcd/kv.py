"""etcd's KV service (etcdserverpb.KV) on coord's state machine: the same commands,
write path (propose, or forward to the leader) and read path (ReadIndex unless
serializable) as coord's own KV service; only the wire format and errors are etcd's.
Writes are made as the caller, whose permissions apply checks; a range is checked here,
after its read (etcd's order: the key, the caller, its permission, then the revision)."""

from __future__ import annotations

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd import errors as err
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.errors import etcd_call
from coord.server.requests.coordinator import Coordinator, call_timeout, new_request_id
from coord.sm import commands as c


class EtcdKVService(rpc_pb2_grpc.KVServicer):
    def __init__(self, coord: Coordinator, access: EtcdAccess) -> None:
        self.coord = coord
        self.access = access

    async def _write(self, cmd, context, request):
        """Propose `cmd` for `request` as the caller (etcd's order: who the caller is,
        then --max-request-bytes)."""
        cmd = await self.access.made_as(cmd, context)
        self.coord.limits.check_request_bytes(request.ByteSize())
        return err.check(await self.coord.write(cmd, call_timeout(context), local_apply=True))

    @etcd_call
    async def Range(self, request, context):  # noqa: N802
        cmd = conv.range_from_pb(request)
        user = await self.access.user(context)

        async def allowed() -> None:
            self.access.check_read(user, cmd.key, cmd.range_end)

        res = err.check(await self.coord.read(cmd, request.serializable,
                                              call_timeout(context), allowed))
        return conv.range_to_pb(request, res, conv.header(self.coord, res.revision))

    @etcd_call
    async def Put(self, request, context):  # noqa: N802
        res = await self._write(conv.put_from_pb(request, new_request_id()), context, request)
        return conv.put_to_pb(res, conv.header(self.coord, res.revision))

    @etcd_call
    async def DeleteRange(self, request, context):  # noqa: N802
        res = await self._write(conv.delete_from_pb(request, new_request_id()), context,
                                request)
        return conv.delete_to_pb(res, conv.header(self.coord, res.revision))

    @etcd_call
    async def Txn(self, request, context):  # noqa: N802
        cmd = conv.txn_from_pb(request, self.coord.limits.max_txn_ops, new_request_id())
        res = await self._write(cmd, context, request)
        return conv.txn_to_pb(request, res, conv.header(self.coord, res.revision))

    @etcd_call
    async def Compact(self, request, context):  # noqa: N802
        # As etcd's, a compaction leaves the revision where it is.
        res = await self._write(c.Compact(request.revision), context, request)
        return pb.CompactionResponse(header=conv.header(self.coord, res.revision))
