"""WatchSessions and WatchProducers (admin.proto): an operator console's sessions and
producer-id tables as streams — a listing, an entry of kind "listed", then what changed
as this member applies the log.

A stream's position is the Raft log index its member had applied when it sent an entry
(no revision orders these changes: opening a session does not move it). A reopened
stream (`after_index`) first waits, at most CATCH_UP_S, until this member has applied
that far, so nothing it shows is older than what its caller has already seen; then it
lists again: no member keeps a history of these tables (the replicated history covers
keys and owners only), so the caller keeps the rows the listing names and drops the rest.

Each round builds its entries at once, from one applied state, then sends them and pauses
ROUND_GAP_S: a burst of applied batches costs one round. A sessions round reads only the
sessions that changed (`SessionsWatch`); a producers round walks the pid tables (bounded
by the pid capacity and the remembered blocks) only when they moved.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc

from coord.server.api.console_views import lease_detail, session_detail
from coord.server.api.errors import abort
from coord.server.node.driver import Node
from coord.server.requests.events import EventHub
from coord.server.requests.table_watch import SessionsWatch, TableWatch
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm.machine import CoordMachine
from coord.sm.pids import PidLease
from coord.v1 import admin_pb2

CATCH_UP_S = 3.0
ROUND_GAP_S = 0.05


async def caught_up(node: Node, watch: TableWatch, index: int,
                    context: grpc.aio.ServicerContext) -> None:
    """Wait until this member has applied `index`; UNAVAILABLE/BEHIND after CATCH_UP_S
    (the caller's stream then reopens on another member)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CATCH_UP_S
    while True:
        watch.wake.clear()
        if node.applied_index >= index:
            return
        left = deadline - loop.time()
        if left <= 0:
            await abort(context, grpc.StatusCode.UNAVAILABLE, "BEHIND",
                        f"member {node.me.name} has applied up to index "
                        f"{node.applied_index}; the caller has seen {index}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.wake.wait(), left)


async def _next_round(watch: TableWatch) -> None:
    await asyncio.sleep(ROUND_GAP_S)
    await watch.wake.wait()
    watch.wake.clear()


# -- sessions -----------------------------------------------------------------------------


class _SessionRounds:
    def __init__(self, node: Node, machine: CoordMachine, tracker: SessionTracker | None,
                 watch: SessionsWatch) -> None:
        self.node, self.machine, self.tracker, self.watch = node, machine, tracker, watch

    def _change(self, **fields: object) -> admin_pb2.SessionChange:
        leader = self.node.is_leader and self.tracker is not None
        return admin_pb2.SessionChange(
            index=self.node.applied_index, revision=self.machine.revision,
            member=self.node.me.name, leader=leader, **fields)

    def _row(self, sid: int) -> admin_pb2.SessionDetail | None:
        s = self.machine.sessions.get(sid)
        if s is None:
            return None
        leader = self.node.is_leader and self.tracker is not None
        return session_detail(s, self.tracker if leader else None)

    def listing(self) -> list[admin_pb2.SessionChange]:
        watch, sessions = self.watch, self.machine.sessions
        watch.take()
        watch.held.clear()
        out = []
        for sid in sessions.ids():
            s = sessions.get(sid)
            if s is not None:
                watch.hold(s)
                out.append(self._change(kind="upsert", snapshot=True, session=self._row(sid)))
        out.append(self._change(kind="listed", snapshot=True))
        return out

    def changes(self) -> list[admin_pb2.SessionChange]:
        dirty, ended = self.watch.take()
        out = []
        for sid in dirty:
            row = self._row(sid)
            if row is not None:
                out.append(self._change(kind="upsert", session=row))
            else:
                out.append(self._change(kind="ended", reason=ended.get(sid, ""),
                                        session=admin_pb2.SessionDetail(id=sid)))
        return out


async def watch_sessions(node: Node, machine: CoordMachine, hub: EventHub,
                         tracker: SessionTracker | None, after_index: int,
                         context: grpc.aio.ServicerContext
                         ) -> AsyncIterator[admin_pb2.SessionChange]:
    watch = SessionsWatch()
    hub.watch_tables(watch)  # before the listing, with no await between: no gap
    try:
        await caught_up(node, watch, after_index, context)
        rounds = _SessionRounds(node, machine, tracker, watch)
        while True:
            table = machine.sessions
            for change in rounds.listing():
                yield change
            while machine.sessions is table:  # a snapshot installed replaces the table
                await _next_round(watch)
                if machine.sessions is table:
                    for change in rounds.changes():
                        yield change
    finally:
        hub.unwatch_tables(watch)


# -- producers ----------------------------------------------------------------------------


class _PidMirror:
    """What the stream has sent of the pid tables, to send only the difference."""

    def __init__(self, node: Node, machine: CoordMachine) -> None:
        self.node, self.machine = node, machine
        self.pids = None
        self.changes = -1
        self.blocks: dict[tuple[str, int], tuple[str, int, int, int]] = {}
        self.leases: dict[int, PidLease] = {}
        self.producers: dict[str, tuple[int, int]] = {}
        self.first_expiry: int | None = None

    def moved(self) -> bool:
        m = self.machine
        return (m.pids is not self.pids or m.pids.changes != self.changes
                or (self.first_expiry is not None and self.first_expiry <= m.elapsed.now_ms))

    def _change(self, **fields: object) -> admin_pb2.ProducerChange:
        m = self.machine
        return admin_pb2.ProducerChange(
            next_pid=m.pids.next_pid, clock_ms=m.clock_ms, revision=m.revision,
            index=self.node.applied_index, **fields)

    def round(self) -> list[admin_pb2.ProducerChange]:
        """The rows that differ from what was sent; a listing (every row, then "listed")
        the first time and after a snapshot replaced the tables."""
        m = self.machine
        pids = m.pids
        listing = pids is not self.pids
        if listing:
            self.blocks, self.leases, self.producers = {}, {}, {}
        self.pids, self.changes = pids, pids.changes
        blocks = {(b[0], b[1]): b for b in pids.recent_blocks()}
        leases = {lease.pid: lease for lease in pids.live_leases(m.elapsed.now_ms)}
        producers = dict(pids.producers)
        self.first_expiry = min((x.expire_ms for x in leases.values()), default=None)
        out: list[admin_pb2.ProducerChange] = []
        for key in self.blocks.keys() - blocks.keys():
            requester, start, size, revision = self.blocks[key]
            out.append(self._change(kind="block", removed=True, block=admin_pb2.PidBlock(
                requester=requester, start=start, size=size, revision=revision)))
        for pid in sorted(self.leases.keys() - leases.keys()):
            out.append(self._change(kind="lease", removed=True,
                                    lease=lease_detail(m, self.leases[pid])))
        for key in sorted(self.producers.keys() - producers.keys()):
            pid, epoch = self.producers[key]
            out.append(self._change(kind="producer", removed=True, producer=admin_pb2.
                                    ProducerDetail(producer_key=key, pid=pid, epoch=epoch)))
        for key, (requester, start, size, revision) in blocks.items():
            if self.blocks.get(key) != blocks[key]:
                out.append(self._change(kind="block", snapshot=listing, block=admin_pb2.
                                        PidBlock(requester=requester, start=start, size=size,
                                                 revision=revision)))
        for pid, lease in leases.items():
            if self.leases.get(pid) != lease:
                out.append(self._change(kind="lease", snapshot=listing,
                                        lease=lease_detail(m, lease)))
        for key in sorted(producers):
            if self.producers.get(key) != producers[key]:
                pid, epoch = producers[key]
                out.append(self._change(kind="producer", snapshot=listing, producer=admin_pb2.
                                        ProducerDetail(producer_key=key, pid=pid, epoch=epoch)))
        if listing:
            out.append(self._change(kind="listed", snapshot=True))
        self.blocks, self.leases, self.producers = blocks, leases, producers
        return out


async def watch_producers(node: Node, machine: CoordMachine, hub: EventHub, after_index: int,
                          context: grpc.aio.ServicerContext
                          ) -> AsyncIterator[admin_pb2.ProducerChange]:
    watch = hub.watch_tables(TableWatch())
    try:
        await caught_up(node, watch, after_index, context)
        mirror = _PidMirror(node, machine)
        while True:
            for change in mirror.round():
                yield change
            while not mirror.moved():
                await _next_round(watch)
    finally:
        hub.unwatch_tables(watch)
