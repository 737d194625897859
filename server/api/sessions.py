"""The Sessions service: open/close, keepalive (to the leader, never replicated) and
each session's event stream."""

from __future__ import annotations

import logging

import grpc

from coord.server.api.common import admit_reader, write
from coord.server.api.errors import abort, abort_node_error
from coord.server.core import liveness
from coord.server.core.coordinator import Coordinator
from coord.server.core.events import EventHub
from coord.server.core.liveness import GONE
from coord.server.core.mode import READ_WRITE, ModeChange
from coord.server.core.session_tracker import SessionTracker
from coord.server.node.errors import NodeError
from coord.sm import commands as c
from coord.sm.records import SessionEvent
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc

log = logging.getLogger(__name__)

KEEPALIVE_FORWARD_TIMEOUT_S = 0.25  # well under a keepalive interval (>= TTL/3 >= 0.33 s)
ENDING_EVENTS = frozenset({"severed", "expired", "released"})


def session_event_to_pb(e: SessionEvent) -> pb.SessionEvent:
    return pb.SessionEvent(
        type=e.type,
        session_id=e.session_id,
        revision=e.revision,
        group=e.group,
        resource=e.resource,
        generation=e.generation,
        new_owner=e.new_owner,
        resources=[claim.resource for claim in e.claims],
    )


class SessionsService(coord_pb2_grpc.SessionsServicer):
    def __init__(self, coord: Coordinator, hub: EventHub, tracker: SessionTracker) -> None:
        self.coord = coord
        self.hub = hub
        self.tracker = tracker

    async def OpenSession(self, request, context):  # noqa: N802
        cmd = c.OpenSession(request.name, request.ttl_ms, request.read_only_ok, request.request_id)
        res = await write(context, self.coord, cmd)
        return pb.OpenSessionResponse(
            header=self.coord.header(res.revision), session_id=res.session_id, ttl_ms=res.ttl_ms
        )

    async def CloseSession(self, request, context):  # noqa: N802
        res = await write(context, self.coord, c.CloseSession(request.session_id))
        return pb.CloseSessionResponse(header=self.coord.header(res.revision))

    async def KeepAlive(self, request_iterator, context):  # noqa: N802
        async for req in request_iterator:
            if await admit_reader(context, self.coord, req.session_id):
                # Read-only: no leader can renew it; say so instead of pretending.
                session = self.coord.machine.sessions.get(req.session_id)
                yield pb.KeepAliveResponse(
                    session_id=req.session_id,
                    ttl_ms=session.ttl_ms if session else 0,
                    read_only=True,
                )
                continue
            ttl = await self._keepalive(req.session_id)
            if ttl is None:
                # No leader answered in time: say so at once, so the client does not take
                # this live member for a stuck one and move off it.
                yield pb.KeepAliveResponse(session_id=req.session_id, pending=True)
                continue
            yield pb.KeepAliveResponse(
                session_id=req.session_id, ttl_ms=max(ttl, 0), gone=ttl == GONE
            )

    async def _keepalive(self, session_id: int) -> int | None:
        return await liveness.renew(
            self.coord, self.tracker, session_id, timeout=KEEPALIVE_FORWARD_TIMEOUT_S
        )

    async def Events(self, request, context):  # noqa: N802
        sid = request.session_id
        sub = self.hub.watch_session(sid)
        try:
            if await admit_reader(context, self.coord, sid):
                yield self._mode_event(sid, self.coord.mode.mode)  # where it stands now
            else:
                # Linearizable existence check: a lagging member must not call a new
                # session gone.
                try:
                    await self.coord.barrier(timeout=2.0)
                except NodeError as e:
                    await abort_node_error(context, e)
            if sid not in self.coord.machine.sessions:
                await abort(
                    context,
                    grpc.StatusCode.NOT_FOUND,
                    "UNKNOWN_SESSION",
                    f"session {request.session_id} does not exist (expired, closed or severed)",
                )
            while True:
                event = await sub.queue.get()
                if sub.overflowed or event is None:
                    return
                if isinstance(event, ModeChange):
                    if event.mode != READ_WRITE:
                        await admit_reader(context, self.coord, sid)  # or NO_QUORUM: move on
                    yield self._mode_event(sid, event.mode, event)
                    continue
                yield session_event_to_pb(event)
                if event.type in ENDING_EVENTS:
                    return
        finally:
            self.hub.cancel(sub)

    def _mode_event(self, sid: int, mode: str, change: ModeChange | None = None) -> pb.SessionEvent:
        coord = self.coord
        return pb.SessionEvent(
            type="mode_changed",
            session_id=sid,
            mode=mode,
            member=coord.node.me.name,
            term=change.term if change else coord.node.term,
            revision=change.revision if change else coord.machine.revision,
        )


__all__ = ["SessionsService"]
