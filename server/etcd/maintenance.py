"""etcd's Maintenance service on one member: Status (its store as dbSize / dbSizeInUse,
active alarms as errors), Alarm (the replicated alarms: read, raise, lower), Defragment
(VACUUM of this member's store), Hash and HashKV (numbers members that agree share), and
Snapshot (a consistent point-in-time copy of the state, streamed). While auth is on,
Hash, HashKV, Defragment and Snapshot need the root role (etcd 3.4's rule, and its
untranslated "auth: ..." refusals); Status and Alarm need no user.

The big ones — hashing or serializing a million keys — run a slice at a time between
loop iterations from containers copied in milliseconds, as the node's own snapshots do,
so a member that hashes keeps stepping Raft."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import zlib
from collections.abc import Generator, Iterator

import grpc

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.cluster import VERSION
from coord.server.etcd.errors import (
    COMPACTED,
    FUTURE_REV,
    EtcdError,
    check,
    etcd_call,
    untranslated,
)
from coord.server.node.snapshots import spool_pieces
from coord.server.requests.coordinator import Coordinator
from coord.server.storage.log_store import LogStore, StorageError, StoreSpace
from coord.server.transport.snapshot_pieces import Spool
from coord.sm.alarms import ACTIVATE, DEACTIVATE
from coord.sm.commands import Alarm
from coord.sm.kv_hash import hash_steps

log = logging.getLogger(__name__)

SECTOR = 512  # etcdctl takes a stream whose length is 32 more than a multiple of this
SNAPSHOT_CHUNK = 1 << 20  # bytes per SnapshotResponse (etcd sends 32 KiB; fewer calls here)


async def _run(steps: Generator[None, None, int]) -> int:
    """Drive a sliced computation, letting the loop run between slices."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


class EtcdMaintenanceService(rpc_pb2_grpc.MaintenanceServicer):
    """Status reports the member's store as etcd's dbSize (the file) and dbSizeInUse (its
    pages holding data), and active alarms as etcd's errors; Alarm reads and changes the
    replicated alarms; Defragment VACUUMs this member's store."""

    def __init__(self, coord: Coordinator, store: LogStore, access: EtcdAccess) -> None:
        self.coord = coord
        self.store = store
        self.access = access

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
        """etcd 3.4's answers: GET lists the alarms (one kind, or all for NONE); ACTIVATE
        and DEACTIVATE change one member's alarm (member 0 is one too) through the log
        and answer the alarm raised, or the one lowered if it was up. Lowering kind NONE
        lowers nothing, as in etcd (`etcdctl alarm disarm` lists and lowers each)."""
        try:
            actor = await self.access.user(context)
        except EtcdError as e:
            raise untranslated(e) from None
        known = request.alarm in pb.AlarmType.values()
        kind = pb.AlarmType.Name(request.alarm) if known else str(request.alarm)
        if request.action == pb.AlarmRequest.GET:
            alarms = [a for a in self.coord.machine.alarms.active() if kind in ("NONE", a[1])]
        elif kind == "NONE" and request.action == pb.AlarmRequest.DEACTIVATE:
            alarms = []
        elif kind != "NOSPACE":
            raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT,
                            f"etcdserver: alarm {kind} is not one coord raises")
        else:
            action = ACTIVATE if request.action == pb.AlarmRequest.ACTIVATE else DEACTIVATE
            result = check(await self.coord.write(
                Alarm(action, request.memberID, kind, actor=actor), local_apply=True))
            alarms = [(int(m), k) for m, k in (a.split(":") for a in result.alarms)]
        out = pb.AlarmResponse(header=conv.header(self.coord))
        for member_id, active in alarms:
            out.alarms.add(memberID=member_id, alarm=pb.AlarmType.Value(active))
        return out

    @etcd_call
    async def HashKV(self, request, context):  # noqa: N802
        """The key space at `revision` (0: now) and the history kept up to it; equal on
        members that applied the same log (COMPACTED / future revision as etcd)."""
        await self.access.maintenance_admin(context)
        kv = self.coord.machine.kv
        if request.revision and request.revision < kv.compact_revision:
            raise COMPACTED
        if request.revision > self.coord.machine.revision:
            raise FUTURE_REV
        view = kv.view()
        value = await _run(hash_steps(view, request.revision))
        return pb.HashKVResponse(header=conv.header(self.coord, view.revision), hash=value,
                                 compact_revision=view.compact_revision)

    @etcd_call
    async def Hash(self, request, context):  # noqa: N802
        """CRC-32 of the whole state's snapshot bytes (sessions, owners, producer ids,
        alarms too): equal on members at the same applied revision."""
        await self.access.maintenance_admin(context)
        revision = self.coord.machine.revision
        value = 0
        for piece in self.coord.machine.capture():
            value = zlib.crc32(piece, value)
            await asyncio.sleep(0)
        return pb.HashResponse(header=conv.header(self.coord, revision), hash=value)

    async def Snapshot(self, request, context):  # noqa: N802
        """The state machine's snapshot as of now (coord's native format, what `coord
        snapshot save` writes), zero-padded to 512-byte sectors and followed by the
        SHA-256 of what came before — the shape `etcdctl snapshot save` checks for — so a
        copy can be verified; `remaining_bytes` counts down to 0. The capture goes to a
        spool file and is sent from there a blob at a time: the member never holds the
        whole snapshot (a second copy of the state) in memory."""
        try:
            await self.access.maintenance_admin(context)
        except EtcdError as e:
            await context.abort(e.code, e.message)
        revision = self.coord.machine.revision
        spool = await spool_pieces(self.coord.machine.capture())
        try:
            header = conv.header(self.coord, revision)
            pad = -spool.size % SECTOR  # the zlib stream ends before the padding
            remaining = spool.size + pad + hashlib.sha256().digest_size
            for blob in _sealed(spool, pad):
                remaining -= len(blob)
                yield pb.SnapshotResponse(header=header, blob=blob, remaining_bytes=remaining)
        finally:
            spool.clear()

    @etcd_call
    async def Defragment(self, request, context):  # noqa: N802
        await self.access.maintenance_admin(context)
        try:
            before, after = await asyncio.to_thread(self.store.defrag)
        except StorageError as e:
            raise EtcdError(grpc.StatusCode.INTERNAL, f"etcdserver: {e}") from None
        log.info("%s: defragmented its store: %d -> %d bytes on disk",
                 self.coord.node.me.name, before.file_bytes, after.file_bytes)
        return pb.DefragmentResponse(header=conv.header(self.coord))


def _sealed(spool: Spool, pad: int) -> Iterator[bytes]:
    """The spooled snapshot, `pad` zero bytes and the SHA-256 of both, in blobs of
    SNAPSHOT_CHUNK (the last one shorter), read from the spool a blob at a time."""
    sha = hashlib.sha256()
    last = b""
    for block in spool.blocks(SNAPSHOT_CHUNK):
        if last:
            yield last
        sha.update(block)
        last = block
    zeros = b"\0" * pad
    sha.update(zeros)
    tail = last + zeros + sha.digest()
    for start in range(0, len(tail), SNAPSHOT_CHUNK):
        yield tail[start:start + SNAPSHOT_CHUNK]
