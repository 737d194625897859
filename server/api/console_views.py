"""Read-only inspection for an operator's console (`coord tui`): every session with what
it holds, the producer-id tables, and one stream of every group's owners.

Served from this member's local state, without a ReadIndex round, so a console keeps
showing the cluster while it has no quorum (the answer says which member served it and
at which revision). Only the leader tracks session deadlines, so only its answer carries
the time a session has left.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from coord.server.api.convert import owner_to_pb, ownership_event_to_pb
from coord.server.node.driver import Node
from coord.server.requests.events import EventHub, Restored
from coord.server.upkeep.mode import ModeChange
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm.machine import CoordMachine
from coord.sm.pids import PidLease
from coord.sm.sessions import Session
from coord.v1 import admin_pb2
from coord.v1 import coord_pb2 as pb

UNKNOWN = -1


def storage_bytes(path: Path | None) -> int:
    """The storage file's size with its SQLite WAL and shared-memory files (0: none)."""
    if path is None:
        return 0
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += os.stat(f"{path}{suffix}").st_size
    return total


def list_sessions(node: Node, machine: CoordMachine,
                  tracker: SessionTracker | None) -> admin_pb2.ListSessionsResponse:
    leader = node.is_leader and tracker is not None
    resp = admin_pb2.ListSessionsResponse(
        revision=machine.revision, member=node.me.name, leader=leader)
    for sid in machine.sessions.ids():
        s = machine.sessions.get(sid)
        if s is not None:
            resp.sessions.append(session_detail(s, tracker if leader else None))
    return resp


def session_detail(s: Session, tracker: SessionTracker | None) -> admin_pb2.SessionDetail:
    """One session's row; `tracker` (the leader's only) says how long it has left."""
    remaining = tracker.remaining(s.id) if tracker is not None else None
    detail = admin_pb2.SessionDetail(
        id=s.id, name=s.name, ttl_ms=s.ttl_ms, read_only_ok=s.read_only_ok,
        opened_ms=s.opened_ms,
        remaining_ms=remaining if remaining is not None and remaining > 0 else UNKNOWN,
        keys=sorted(s.keys))
    for group, resource in sorted(s.owned):
        detail.owned.add(group=group, resource=resource)
    return detail


def list_producers(machine: CoordMachine) -> admin_pb2.ListProducersResponse:
    pids = machine.pids
    resp = admin_pb2.ListProducersResponse(
        revision=machine.revision, next_pid=pids.next_pid, clock_ms=machine.clock_ms)
    for requester, start, size, revision in pids.recent_blocks():
        resp.blocks.add(requester=requester, start=start, size=size, revision=revision)
    for lease in pids.live_leases(machine.elapsed.now_ms):
        resp.leases.append(lease_detail(machine, lease))
    for key, (pid, generation) in sorted(pids.producers.items()):
        resp.producers.add(producer_key=key, pid=pid, epoch=generation)
    return resp


def lease_detail(machine: CoordMachine, lease: PidLease) -> admin_pb2.PidLeaseDetail:
    """A lease runs on the elapsed clock (coord/sm/elapsed.py); shown as leader wall time."""
    return admin_pb2.PidLeaseDetail(
        pid=lease.pid, epoch=lease.generation,
        expire_ms=machine.clock_ms + lease.expire_ms - machine.elapsed.now_ms,
        topic=lease.topic, partition=lease.partition)


async def watch_ownership(machine: CoordMachine, hub: EventHub,
                          context: grpc.aio.ServicerContext) -> AsyncIterator[pb.OwnerChange]:
    """The listing, a "listed" marker, then live changes. We subscribe before reading (no
    await in between), so a change applied around the listing reaches the subscription
    too; changes at or below the listing's revision are dropped."""
    sub = hub.watch_all_owners()
    try:
        seen = machine.revision
        for group, owner in machine.ownership.all_owners():
            yield pb.OwnerChange(group=group, owner=owner_to_pb(owner), snapshot=True)
        yield pb.OwnerChange(kind="listed", snapshot=True,
                             owner=pb.Owner(revision=seen))
        while True:
            event = await sub.queue.get()
            if sub.overflowed:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    "ownership watcher fell behind; watch again")
            if isinstance(event, ModeChange):
                yield pb.OwnerChange(kind="mode", mode=event.mode)
                continue
            if isinstance(event, Restored):  # changes the snapshot covered came as none
                await context.abort(grpc.StatusCode.UNAVAILABLE,
                                    "this member restored a snapshot; watch again")
            if event.revision <= seen:
                continue
            yield ownership_event_to_pb(event)
    finally:
        hub.cancel(sub)
