"""etcd's Lease service (etcdserverpb.Lease): a lease IS a coord session.

Grant opens a session (TTL seconds -> ttl_ms; a client-chosen id is asked for in the
same command; as etcd's, the revision stays where it is), Revoke closes it (its keys go
at one new revision; a lease without keys leaves the revision as it is), KeepAlive renews it
through the leader's session tracker exactly as a native keepalive does, and a lease
expires when the leader proposes its expiry — with the same rule that a failover never
expires a live lease (a new leader restarts every deadline at the full TTL). As in
etcd, a grant checks only a token sent along, and a revoke is made as the caller, who
must be able to write every key attached. While auth is on, a keepalive needs what the
revoke of its lease needs (etcd 3.6 checks the same writes; 3.4 checks none, which let
anyone keep another's keys alive), a refusal ending the stream with etcd's error as
etcd's does, and a follower that does not know the lease catches up before it checks;
a TimeToLive listing a lease's keys needs a user who may read every one (etcd 3.4.26
on), one without keys is not checked.
"""

from __future__ import annotations

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd import errors as err
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.errors import etcd_call
from coord.server.node.errors import NodeError
from coord.server.requests import liveness
from coord.server.requests.coordinator import Coordinator, call_timeout
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm import commands as c
from coord.sm import limits
from coord.sm.sessions import ETCD_LEASE_NAME, LOCAL_SESSION_IDS, is_local_session_id

CATCH_UP_TIMEOUT_S = 0.25  # a keepalive's wait for its member to catch up, under its interval


def ttl_ms_of(ttl_s: int) -> int:
    """etcd raises a TTL below its minimum to the minimum; coord's minimum is 1 s."""
    if ttl_s * 1000 > limits.MAX_TTL_MS:
        raise err.LEASE_TTL_TOO_LARGE
    return max(ttl_s * 1000, limits.MIN_TTL_MS)


class EtcdLeaseService(rpc_pb2_grpc.LeaseServicer):
    def __init__(self, coord: Coordinator, tracker: SessionTracker, access: EtcdAccess) -> None:
        self.coord = coord
        self.tracker = tracker
        self.access = access

    @etcd_call
    async def LeaseGrant(self, request, context):  # noqa: N802
        if request.ID < 0:
            raise err.EtcdError(err.Code.INVALID_ARGUMENT, "etcdserver: lease ID is negative")
        if is_local_session_id(request.ID):
            raise err.EtcdError(err.Code.INVALID_ARGUMENT, (
                f"etcdserver: lease ID {request.ID} is reserved: ids from "
                f"{LOCAL_SESSION_IDS.start} up belong to member-local read-only sessions"))
        await self.access.user(context)
        cmd = c.OpenSession(ETCD_LEASE_NAME, ttl_ms_of(request.TTL), session_id=request.ID)
        res = err.check(await self.coord.write(cmd, call_timeout(context), local_apply=True))
        return pb.LeaseGrantResponse(header=conv.header(self.coord, res.revision),
                                     ID=res.session_id, TTL=res.ttl_ms // 1000)

    @etcd_call
    async def LeaseRevoke(self, request, context):  # noqa: N802
        if request.ID <= 0:
            raise err.LEASE_NOT_FOUND
        cmd = await self.access.made_as(c.CloseSession(request.ID), context)
        res = err.check(await self.coord.write(cmd, call_timeout(context), local_apply=True))
        return pb.LeaseRevokeResponse(header=conv.header(self.coord, res.revision))

    async def LeaseKeepAlive(self, request_iterator, context):  # noqa: N802
        """One response per request once the leader renewed the lease (TTL 0: the lease
        is gone). While no leader can say, the request goes unanswered and the client
        sends again, as with native keepalives."""
        user: str | None = None  # the caller's, found once a keepalive needs it
        async for req in request_iterator:
            if req.ID > 0 and self.access.auth.enabled:
                try:
                    if user is None:
                        user = await self.access.user(context)
                    if not await self._placed(req.ID):
                        continue  # unanswered: the client sends again
                    self.access.check_now(user, c.CloseSession(req.ID))
                except err.EtcdError as e:
                    await context.abort(e.code, e.message)
            # The header is taken before renewing (etcd's rule): a lease revoked at
            # revision r is never reported renewed at a revision above r.
            head = conv.header(self.coord)
            ttl = await liveness.renew(self.coord, self.tracker, req.ID) if req.ID > 0 \
                else liveness.GONE
            if ttl is None:
                continue
            yield pb.LeaseKeepAliveResponse(header=head, ID=req.ID,
                                            TTL=max(ttl, 0) // 1000)

    async def _placed(self, lease_id: int) -> bool:
        """Whether this member can check a keepalive of `lease_id`: a follower that
        does not know the lease (it may lag behind its grant) catches up first rather
        than forward it unchecked (the leader renews by id alone); False if it cannot
        in CATCH_UP_TIMEOUT_S. Once caught up, an unknown lease is the leader's to
        call gone."""
        if lease_id in self.coord.machine.sessions or self.coord.node.is_leader:
            return True
        try:
            await self.coord.barrier(CATCH_UP_TIMEOUT_S)
        except NodeError:
            return False
        return True

    @etcd_call
    async def LeaseTimeToLive(self, request, context):  # noqa: N802
        """A lease that does not exist answers TTL -1, not an error (etcd does so)."""
        await self.coord.barrier(call_timeout(context))
        if request.keys:
            self.access.check_lease_keys_read(await self.access.user(context), request.ID)
        session = self.coord.machine.sessions.get(request.ID)
        left = None if session is None else \
            await liveness.remaining(self.coord, self.tracker, request.ID)
        if session is None or left == liveness.GONE:
            return pb.LeaseTimeToLiveResponse(header=conv.header(self.coord), ID=request.ID,
                                              TTL=-1)
        if left is None:
            left = session.ttl_ms  # no leader can say: the full TTL is the honest bound
        out = pb.LeaseTimeToLiveResponse(header=conv.header(self.coord), ID=request.ID,
                                         TTL=left // 1000, grantedTTL=session.ttl_ms // 1000)
        if request.keys:
            out.keys.extend(sorted(session.keys))
        return out

    @etcd_call
    async def LeaseLeases(self, request, context):  # noqa: N802
        await self.coord.barrier(call_timeout(context))
        ids = self.coord.machine.sessions.ids()
        return pb.LeaseLeasesResponse(header=conv.header(self.coord),
                                      leases=[pb.LeaseStatus(ID=i) for i in ids])
