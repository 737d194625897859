"""The KV service: etcd-shaped keys with revisions, transactions and watches."""

from __future__ import annotations

import grpc

from coord.server.api import convert
from coord.server.api.common import admit_reader, check, invalid, read, write
from coord.server.core.coordinator import Coordinator
from coord.server.core.events import EventHub
from coord.server.core.mode import READ_WRITE, ModeChange
from coord.sm import commands as c
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc


class KVService(coord_pb2_grpc.KVServicer):
    def __init__(self, coord: Coordinator, hub: EventHub) -> None:
        self.coord = coord
        self.hub = hub

    async def Put(self, request, context):  # noqa: N802
        res = await write(context, self.coord, convert.put_from_pb(request))
        return convert.put_result_to_pb(res, self.coord.header(res.revision))

    async def Range(self, request, context):  # noqa: N802
        res = await read(context, self.coord, convert.range_from_pb(request), request.serializable)
        return convert.range_result_to_pb(res, self.coord.header())

    async def DeleteRange(self, request, context):  # noqa: N802
        res = await write(context, self.coord, convert.delete_from_pb(request))
        return convert.delete_result_to_pb(res, self.coord.header(res.revision))

    async def Txn(self, request, context):  # noqa: N802
        try:
            cmd = convert.txn_from_pb(request)
        except ValueError as e:
            await invalid(context, str(e))
        res = await write(context, self.coord, cmd)
        return convert.txn_result_to_pb(res, self.coord.header(res.revision))

    async def _cas(self, context, key: bytes, version: int, value: bytes, session: int, rid: str):
        """The seed's linearizable register: write iff the key is at `version` (0: absent).
        Both branches read the key back, so the caller sees what it is now."""
        txn = c.Txn(
            (c.Compare.of_version(key, "=", version),),
            (c.Put(key, value, session), c.Range(key)),
            (c.Range(key),),
            rid,
        )
        res = await write(context, self.coord, txn)
        current = res.responses[-1].kvs
        out = pb.CasResponse(header=self.coord.header(res.revision), succeeded=res.succeeded)
        if current:
            out.kv.CopyFrom(convert.kv_to_pb(current[0]))
        return out

    async def PutIfAbsent(self, request, context):  # noqa: N802
        return await self._cas(
            context, request.key, 0, request.value, request.session_id, request.request_id
        )

    async def CompareAndSet(self, request, context):  # noqa: N802
        if request.expected_version < 0:
            await invalid(context, "expected_version must be >= 0")
        return await self._cas(
            context,
            request.key,
            request.expected_version,
            request.value,
            request.session_id,
            request.request_id,
        )

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
                    if isinstance(item, ModeChange):
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
