"""The Ownership service: own_request semantics (coord.sm.ownership), release, lookups
and a change stream a router can build its resource -> owner table from."""

from __future__ import annotations

import grpc

from coord.sm import commands as c
from coord.sm.records import Claim, Owner
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc

from .api_common import admit_reader, read, write
from .convert import owner_to_pb
from .coordinator import Coordinator
from .events import EventHub
from .mode import READ_WRITE, ModeChange


class OwnershipService(coord_pb2_grpc.OwnershipServicer):
    def __init__(self, coord: Coordinator, hub: EventHub) -> None:
        self.coord = coord
        self.hub = hub

    async def Own(self, request, context):  # noqa: N802
        claims = tuple(Claim(x.resource, x.generation) for x in request.claims)
        cmd = c.Own(request.session_id, request.group, claims, request.request_id)
        res = await write(context, self.coord, cmd)
        return pb.OwnResponse(
            header=self.coord.header(res.revision),
            grants=[pb.Grant(resource=g.resource, generation=g.generation, revision=g.revision)
                    for g in res.grants],
            severed=list(res.severed),
        )

    async def Release(self, request, context):  # noqa: N802
        cmd = c.Release(
            request.session_id, request.group, tuple(request.resources), request.request_id
        )
        res = await write(context, self.coord, cmd)
        return pb.ReleaseResponse(
            header=self.coord.header(res.revision), released=list(res.released)
        )

    async def GetOwner(self, request, context):  # noqa: N802
        res = await read(
            context, self.coord, c.GetOwner(request.group, request.resource), request.serializable
        )
        owner = Owner(res.resource, res.owner, res.generation, res.owner_revision)
        return pb.GetOwnerResponse(header=self.coord.header(), owner=owner_to_pb(owner))

    async def ListOwners(self, request, context):  # noqa: N802
        res = await read(
            context, self.coord, c.ListOwners(request.group, request.prefix), request.serializable
        )
        return pb.ListOwnersResponse(
            header=self.coord.header(), owners=[owner_to_pb(o) for o in res.owners]
        )

    async def WatchOwners(self, request, context):  # noqa: N802
        """First the current owners (those changed at or after `from_revision`), flagged
        `snapshot`, then every change as it is applied."""
        if not await admit_reader(context, self.coord):
            await self.coord.barrier()
        sub = self.hub.watch_owners(request.group, request.prefix)
        try:
            res = self.coord.machine.query(c.ListOwners(request.group, request.prefix))
            for o in res.owners:
                if o.revision >= request.from_revision:
                    yield pb.OwnerChange(group=request.group, owner=owner_to_pb(o), snapshot=True)
            while True:
                event = await sub.queue.get()
                if sub.overflowed:
                    await context.abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED, "owner watcher fell behind; resubscribe"
                    )
                if isinstance(event, ModeChange):
                    if event.mode != READ_WRITE:
                        await admit_reader(context, self.coord)  # or NO_QUORUM: move on
                    continue
                owner = Owner(event.resource, event.owner, event.generation, event.revision)
                yield pb.OwnerChange(group=event.group, owner=owner_to_pb(owner))
        finally:
            self.hub.cancel(sub)
