"""The Sessions service: open/close, keepalive (to the leader, never replicated) and
each session's event stream."""

from __future__ import annotations

import logging

import grpc

from coord.sm import commands as c
from coord.sm.records import SessionEvent
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc

from . import liveness
from .api_common import write
from .coordinator import Coordinator
from .errors import abort, abort_node_error
from .events import EventHub
from .liveness import GONE
from .node import NodeError
from .session_tracker import SessionTracker

log = logging.getLogger(__name__)

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
            ttl = await self._keepalive(req.session_id)
            if ttl is None:
                continue  # nobody can say right now; the client keeps sending
            yield pb.KeepAliveResponse(
                session_id=req.session_id, ttl_ms=max(ttl, 0), gone=ttl == GONE
            )

    async def _keepalive(self, session_id: int) -> int | None:
        return await liveness.renew(self.coord, self.tracker, session_id)

    async def Events(self, request, context):  # noqa: N802
        sub = self.hub.watch_session(request.session_id)
        try:
            # Linearizable existence check: a lagging member must not call a new session gone.
            try:
                await self.coord.barrier(timeout=2.0)
            except NodeError as e:
                await abort_node_error(context, e)
            if request.session_id not in self.coord.machine.sessions:
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
                if isinstance(event, pb.SessionEvent):
                    yield event  # member-local (mode changes)
                    continue
                yield session_event_to_pb(event)
                if event.type in ENDING_EVENTS:
                    return
        finally:
            self.hub.cancel(sub)


__all__ = ["SessionsService"]
