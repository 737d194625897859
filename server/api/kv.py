"""The KV service: etcd-shaped keys with revisions, transactions and watches."""

from __future__ import annotations

import grpc

from coord.server.api import convert, ops
from coord.server.api.common import admit_reader, check, invalid, may_read, write
from coord.server.api.ops import unary
from coord.server.requests.coordinator import Coordinator
from coord.server.requests.events import EventHub, Restored
from coord.server.upkeep.mode import READ_WRITE, ModeChange
from coord.sm import commands as c
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc


class KVService(coord_pb2_grpc.KVServicer):
    def __init__(self, coord: Coordinator, hub: EventHub) -> None:
        self.coord = coord
        self.hub = hub

    Put = unary(ops.put)
    Range = unary(ops.range_)
    DeleteRange = unary(ops.delete_range)
    Txn = unary(ops.txn)
    PutIfAbsent = unary(ops.put_if_absent)
    CompareAndSet = unary(ops.compare_and_set)

    async def Compact(self, request, context):  # noqa: N802
        res = await write(context, self.coord, c.Compact(request.revision))
        return pb.CompactResponse(header=self.coord.header(res.revision))

    async def Watch(self, request, context):  # noqa: N802
        start, end = convert.key_range(request.key, request.range_end, request.prefix)
        if not start:
            await invalid(context, "watch needs a key or prefix")
        if request.from_revision < 0:
            await invalid(context, "from_revision must be >= 0")
        # Subscribe before reading history (no await in between): nothing falls in a gap.
        sub = self.hub.watch_kv(start, end)
        try:
            await admit_reader(context, self.coord)
            await may_read(context, self.coord, c.EventsSince(request.from_revision, start, end))
            last = self.coord.machine.revision
            if request.from_revision:
                hist = self.coord.machine.query(c.EventsSince(request.from_revision, start, end))
                if hist.error == "COMPACTED":
                    yield pb.WatchResponse(
                        header=self.coord.header(), compact_revision=hist.compact_revision
                    )
                    return
                await check(context, hist)
                if hist.events:
                    yield self._response(hist.events, request.prev_kv)
            else:
                yield pb.WatchResponse(header=self.coord.header())  # "watch created"
            while True:
                event = await sub.queue.get()
                if sub.overflowed:
                    await context.abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"watcher fell behind; resume from revision {last + 1}",
                    )
                items = [event]
                while not sub.queue.empty():
                    items.append(sub.queue.get_nowait())
                floor = max(last, request.from_revision - 1)
                events: list = []
                for item in items:
                    if isinstance(item, Restored):  # read what the snapshot covered
                        hist = self.coord.machine.query(c.EventsSince(floor + 1, start, end))
                        if hist.error == "COMPACTED":
                            if events:
                                yield self._response(events, request.prev_kv)
                            yield pb.WatchResponse(header=self.coord.header(),
                                                   compact_revision=hist.compact_revision)
                            return
                        for e in hist.events:
                            events.append(e)
                            last = floor = e.revision
                    elif isinstance(item, ModeChange):
                        if events:
                            yield self._response(events, request.prev_kv)
                            events = []
                        if item.mode != READ_WRITE:
                            await admit_reader(context, self.coord)  # or NO_QUORUM: move on
                        yield pb.WatchResponse(header=self.coord.header(), mode=item.mode)
                    elif item is not None and item.revision > floor:
                        events.append(item)
                        last = floor = item.revision
                if events:
                    yield self._response(events, request.prev_kv)
        finally:
            self.hub.cancel(sub)

    def _response(self, events, prev_kv: bool) -> pb.WatchResponse:
        return pb.WatchResponse(
            header=self.coord.header(events[-1].revision),
            events=[convert.watch_event_to_pb(e, prev_kv) for e in events],
        )
