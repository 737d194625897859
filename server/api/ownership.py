"""The Ownership service: own_request semantics (coord.sm.ownership), release, lookups
and a change stream a router can build its resource -> owner table from."""

from __future__ import annotations

import grpc

from coord.server.api import ops
from coord.server.api.common import admit_reader, check, may_read
from coord.server.api.convert import owner_to_pb, ownership_event_to_pb
from coord.server.api.errors import abort_node_error
from coord.server.api.ops import unary
from coord.server.node.errors import NodeError
from coord.server.requests.coordinator import Coordinator
from coord.server.requests.events import EventHub, Restored
from coord.server.upkeep.mode import READ_WRITE, ModeChange
from coord.sm import commands as c
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc


class OwnershipService(coord_pb2_grpc.OwnershipServicer):
    def __init__(self, coord: Coordinator, hub: EventHub) -> None:
        self.coord = coord
        self.hub = hub

    Own = unary(ops.own)
    Release = unary(ops.release)
    GetOwner = unary(ops.get_owner)
    ListOwners = unary(ops.list_owners)

    async def WatchOwners(self, request, context):  # noqa: N802
        """from_revision 0: the current owners (flagged `snapshot`), then every change as
        it is applied. from_revision > 0: like an etcd watch, every change at or after it
        from the replicated history (frees included, which a listing cannot show), then
        live changes; a compacted start fails with COMPACTED (see proto). We subscribe
        before reading (no await in between), so a change applied around the read reaches
        the subscription as well: live changes at or below the revision the read saw are
        dropped. Nothing falls in a gap and nothing arrives twice. The subscription also
        comes before the barrier, so a mode change while it waits is told next."""
        group, prefix, start = request.group, request.prefix, request.from_revision
        sub = self.hub.watch_owners(group, prefix)
        try:
            if not await admit_reader(context, self.coord):
                try:
                    await self.coord.barrier()
                except NodeError as e:
                    # No leader, or the member went read-only meanwhile: a caller it may
                    # serve read-only goes on (the change waits in `sub`), rather than
                    # coming back after its retry pause.
                    if not await admit_reader(context, self.coord):
                        await abort_node_error(context, e)
            await may_read(context, self.coord, c.ListOwners(group, prefix))
            if start:
                hist = await check(context, self.coord.machine.query(
                    c.OwnerEventsSince(start, group, prefix)))
                seen = max(hist.revision, start - 1)  # a future start waits for it
                for event in hist.events:
                    yield ownership_event_to_pb(event)
            else:
                listing = await check(context, self.coord.machine.query(
                    c.ListOwners(group, prefix)))
                seen = listing.revision
                for o in listing.owners:
                    yield pb.OwnerChange(group=group, owner=owner_to_pb(o), snapshot=True)
            while True:
                event = await sub.queue.get()
                if sub.overflowed:
                    await context.abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        "owner watcher fell behind; resume from the last revision received",
                    )
                if isinstance(event, Restored):  # read what the snapshot covered
                    hist = await check(context, self.coord.machine.query(
                        c.OwnerEventsSince(seen + 1, group, prefix)))
                    fresh = [e for e in hist.events if e.revision > seen]
                    for e in fresh:
                        yield ownership_event_to_pb(e)
                    seen = fresh[-1].revision if fresh else seen
                    continue
                if isinstance(event, ModeChange):
                    if event.mode != READ_WRITE:
                        await admit_reader(context, self.coord)  # or NO_QUORUM: move on
                    yield pb.OwnerChange(group=group, kind="mode", mode=event.mode)
                    continue
                if event.revision <= seen:
                    continue
                yield ownership_event_to_pb(event)
        finally:
            self.hub.cancel(sub)
