"""etcd's Watch service (etcdserverpb.Watch): many watchers on one bidirectional stream.

Each stream holds one subscription to the member's EventHub (the fan-out coord's own
watches use, so both see the same revisions). Create, cancel and progress requests are
put into that subscription's queue as markers, so one loop handles requests and events
in the order they happened: a watcher's "created" response comes before its events,
its history (a start revision in the past, read from the state machine's history)
before live events, and a progress response after every event at or below the
revision it reports.

A watcher is created only if the caller may read its range (the stream's token, checked
at each create, as etcd does); else the create is answered created-and-canceled with
etcd's status text as the reason. etcd 3.4.23 checks a watch of every key from `key` on
as a read of `key` alone; coord checks the whole range.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

import grpc

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc
from coord.server.etcd import convert as conv
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.errors import EtcdError
from coord.server.requests.coordinator import Coordinator
from coord.server.requests.events import EventHub, Restored, Subscription, in_range
from coord.sm import commands as c
from coord.sm.records import DELETE, PUT, WatchEvent

DEFAULT_PROGRESS_NOTIFY_S = 600.0  # etcd's default --experimental-watch-progress-notify-interval
ALL = b"\0"
DUPLICATE_ID = "mvcc: duplicate watch ID provided on the WatchStream"
MAX_WATCHERS_PER_STREAM = 1000
"""Watchers one Watch stream may hold (etcd sets none): each costs memory, and every event
is matched against every watcher of the stream. A create past it is refused as etcd
refuses a watch it will not create, the reason naming the limit."""
TOO_MANY_WATCHERS = f"etcdserver: too many watchers on this stream (the limit is " \
    f"{MAX_WATCHERS_PER_STREAM})"
EMPTY_RANGE = "mvcc: watcher range is empty"


@dataclass
class _Create:
    request: pb.WatchCreateRequest
    refusal: str = ""  # why the caller may not watch this (etcd's words), if it may not


@dataclass
class _Cancel:
    watch_id: int


@dataclass
class _Progress:
    revision: int  # every event at or below it was queued before this marker


@dataclass
class _Watcher:
    id: int
    key: bytes
    end: bytes
    prev_kv: bool
    skip: frozenset[str]  # event types filtered out
    progress_notify: bool
    floor: int  # events at or below this revision were sent or predate the watch
    quiet: bool = True  # nothing sent since the last progress notification
    # Compacted at its start: it reports nothing, but (as in etcd) keeps its id until the
    # client cancels it, and the cancel is answered.
    dead: bool = False


@dataclass
class _Stream:
    """One Watch call: its watchers and the state that orders their responses."""

    coord: Coordinator
    watchers: dict[int, _Watcher] = field(default_factory=dict)
    ids: itertools.count = field(default_factory=itertools.count)

    def header(self, revision: int | None = None) -> pb.ResponseHeader:
        return conv.header(self.coord, revision)

    def create(self, req: pb.WatchCreateRequest, refusal: str = "") -> list[pb.WatchResponse]:
        now = self.coord.machine.revision
        if refusal:
            return [self.refused(now, refusal)]
        if req.range_end not in (b"", ALL) and (req.key or ALL) >= req.range_end:
            return [self.refused(now, EMPTY_RANGE)]
        if len(self.watchers) >= MAX_WATCHERS_PER_STREAM:
            return [self.refused(now, TOO_MANY_WATCHERS)]
        wid = req.watch_id
        if wid == 0:  # etcd's AutoWatchID: the next id not in use, from 0
            wid = next(self.ids)
            while wid in self.watchers:
                wid = next(self.ids)
        elif wid in self.watchers:
            return [self.refused(now, DUPLICATE_ID)]
        skip = frozenset({PUT} if pb.WatchCreateRequest.NOPUT in req.filters else set()) | \
            frozenset({DELETE} if pb.WatchCreateRequest.NODELETE in req.filters else set())
        w = _Watcher(wid, req.key or ALL, req.range_end, req.prev_kv, skip,
                     req.progress_notify, floor=max(0, req.start_revision - 1))
        out = [pb.WatchResponse(header=self.header(now), watch_id=wid, created=True)]
        if 0 < req.start_revision <= now:
            hist = self.coord.machine.query(c.EventsSince(req.start_revision, w.key, w.end))
            if hist.error == "COMPACTED":
                # etcd: the watch is created, then canceled with the compact revision
                # (in a header without a revision, and no reason).
                out.append(pb.WatchResponse(
                    header=self.header(0), watch_id=wid, canceled=True,
                    compact_revision=hist.compact_revision))
                w.dead = True
                self.watchers[wid] = w
                return out
            if hist.error:
                out.append(pb.WatchResponse(header=self.header(now), watch_id=wid,
                                            canceled=True,
                                            cancel_reason=f"etcdserver: {hist.message}"))
                return out
            out += self.responses(hist.events, [w])
        w.floor = max(w.floor, now)  # what is applied now came as history, or predates it
        self.watchers[wid] = w
        return out

    def resync(self) -> list[pb.WatchResponse]:
        """After this member restored a snapshot: each watcher's events since its floor,
        from the restored machine's history (no event came for the revisions the snapshot
        covers), or, if that history is compacted, the watcher canceled with the compact
        revision, as etcd cancels a watcher it cannot catch up."""
        out = []
        for w in self.watchers.values():
            if w.dead or w.floor >= self.coord.machine.revision:
                continue
            hist = self.coord.machine.query(c.EventsSince(w.floor + 1, w.key, w.end))
            if hist.error == "COMPACTED":
                out.append(pb.WatchResponse(header=self.header(0), watch_id=w.id,
                                            canceled=True,
                                            compact_revision=hist.compact_revision))
                w.dead = True
            else:
                out += self.responses(hist.events, [w])
        return out

    def refused(self, now: int, reason: str) -> pb.WatchResponse:
        """etcd's answer to a watch it will not create: created and canceled at once,
        under watch id -1."""
        return pb.WatchResponse(header=self.header(now), watch_id=-1, created=True,
                                canceled=True, cancel_reason=reason)

    def cancel(self, wid: int) -> list[pb.WatchResponse]:
        if self.watchers.pop(wid, None) is None:
            return []  # etcd answers nothing for an unknown id
        return [pb.WatchResponse(header=self.header(), watch_id=wid, canceled=True)]

    def responses(self, events: list[WatchEvent] | tuple[WatchEvent, ...],
                  watchers: list[_Watcher]) -> list[pb.WatchResponse]:
        """One response per watcher with events it has not seen, oldest first."""
        if not events:
            return []
        out = []
        last = events[-1].revision
        compacted = self.coord.machine.kv.compact_revision
        for w in watchers:
            if w.dead:
                continue
            mine = [e for e in events if e.revision > w.floor and e.type not in w.skip
                    and in_range(e.kv.key, w.key, w.end)]
            w.floor = max(w.floor, last)
            if mine:
                w.quiet = False
                out.append(pb.WatchResponse(
                    header=self.header(mine[-1].revision), watch_id=w.id,
                    events=[conv.event_to_pb(e, w.prev_kv, compacted) for e in mine]))
        return out

    def progress_notifications(self) -> list[pb.WatchResponse]:
        """For watchers that asked, when nothing was sent to them since the last one."""
        out = []
        for w in self.watchers.values():
            if w.progress_notify and w.quiet and not w.dead:
                out.append(pb.WatchResponse(header=self.header(), watch_id=w.id))
            w.quiet = True
        return out


class EtcdWatchService(rpc_pb2_grpc.WatchServicer):
    def __init__(self, coord: Coordinator, hub: EventHub, access: EtcdAccess,
                 progress_notify_s: float = DEFAULT_PROGRESS_NOTIFY_S) -> None:
        self.coord = coord
        self.hub = hub
        self.access = access
        self.progress_notify_s = progress_notify_s

    async def Watch(self, request_iterator, context):  # noqa: N802
        sub = self.hub.watch_kv(ALL, ALL)  # every key; each watcher filters its own
        stream = _Stream(self.coord)
        reader = asyncio.get_running_loop().create_task(
            self._read(request_iterator, sub, context))
        next_notify = time.monotonic() + self.progress_notify_s
        try:
            while True:
                try:
                    item = await asyncio.wait_for(
                        sub.queue.get(), max(0.0, next_notify - time.monotonic()))
                except TimeoutError:
                    # The queue is empty: every applied event has been sent.
                    for resp in stream.progress_notifications():
                        yield resp
                    next_notify = time.monotonic() + self.progress_notify_s
                    continue
                if sub.overflowed:
                    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                        "etcdserver: watcher fell behind; watch again")
                items = [item]
                while not sub.queue.empty():
                    items.append(sub.queue.get_nowait())
                for resp in self._handle(stream, items):
                    yield resp
        finally:
            reader.cancel()
            self.hub.cancel(sub)

    def _handle(self, stream: _Stream, items: list) -> list[pb.WatchResponse]:
        out: list[pb.WatchResponse] = []
        events: list[WatchEvent] = []
        for item in items:
            if isinstance(item, WatchEvent):
                events.append(item)
                continue
            # A marker: first flush the events queued before it.
            out += stream.responses(events, list(stream.watchers.values()))
            events = []
            if isinstance(item, _Create):
                out += stream.create(item.request, item.refusal)
            elif isinstance(item, _Cancel):
                out += stream.cancel(item.watch_id)
            elif isinstance(item, _Progress):
                out.append(pb.WatchResponse(header=stream.header(item.revision), watch_id=-1))
            elif isinstance(item, Restored):
                out += stream.resync()
        out += stream.responses(events, list(stream.watchers.values()))
        return out

    async def _read(self, request_iterator, sub: Subscription, context) -> None:
        """Requests become markers in the event queue. The client closing its side does
        not end the stream (etcd keeps sending until the call ends)."""
        try:
            await self._read_requests(request_iterator, sub, context)
        except (grpc.aio.AioRpcError, grpc.aio.AbortError, asyncio.InvalidStateError):
            pass  # the call ended; the response side stops with it

    async def _read_requests(self, request_iterator, sub: Subscription, context) -> None:
        async for req in request_iterator:
            kind = req.WhichOneof("request_union")
            if kind == "create_request":
                create = req.create_request
                sub.offer(_Create(create, await self._refusal(create, context)))
            elif kind == "cancel_request":
                sub.offer(_Cancel(req.cancel_request.watch_id))
            elif kind == "progress_request":
                sub.offer(_Progress(self.coord.machine.revision))

    async def _refusal(self, req: pb.WatchCreateRequest, context) -> str:
        """"" if the caller may watch `req`'s range, else etcd's cancel reason: the Go
        status text of the refusal."""
        try:
            self.access.check_read(await self.access.user(context), req.key or ALL,
                                   req.range_end)
        except EtcdError as e:
            code = "".join(word.capitalize() for word in e.code.name.split("_"))
            return f"rpc error: code = {code} desc = {e.message}"
        return ""
