"""The Admin gRPC service: status and the replicated log's own operations.

While auth is on, membership changes and leader transfer need their `admin` permission
(`coord.sm.access.ADMIN_OPS`), checked here after a read barrier (they change nothing the
state machine holds). A raw proposal is made as the caller: a command apply checks
(`coord.sm.machine.CHECKED`) is checked there like any; any other needs the root role.
The inspection reads (ListSessions, ListProducers, the table streams) need READ on the
`admin` key `inspect` (`coord.sm.access.INSPECTION`), checked on the member's applied
state without a barrier, so a console still inspects a read-only member."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import grpc

from coord.raft import ConfChange, ConfChangeType
from coord.server.api import console_views, table_streams
from coord.server.api.common import denied
from coord.server.api.errors import abort, abort_node_error
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError, NotLeader
from coord.server.node.members import MemberInfo, member_id, validate_address
from coord.server.node.statemachine import StateMachine
from coord.server.requests.callers import CallerUsers
from coord.server.requests.coordinator import call_timeout
from coord.server.requests.events import EventHub
from coord.server.requests.local_sessions import LocalSessions
from coord.server.upkeep.mode import ModeMonitor
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm import commands as c
from coord.sm.access import INSPECTION, Need, holds, resource
from coord.sm.auth import ADMIN
from coord.sm.machine import CHECKED, CoordMachine
from coord.v1 import admin_pb2, admin_pb2_grpc
from coord.version import coord_version
from coord.wire import ApiError

INVALID = grpc.StatusCode.INVALID_ARGUMENT
VERSION = coord_version()
MAX_PROPOSAL_BYTES = 1 << 20


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(self, node: Node, machine: StateMachine, mode: ModeMonitor | None = None,
                 *, hub: EventHub | None = None, tracker: SessionTracker | None = None,
                 data_path: Path | None = None, local: LocalSessions | None = None,
                 callers: CallerUsers | None = None,
                 metrics_urls: Callable[[], list[str]] = list) -> None:
        self.node = node
        self.metrics_urls = metrics_urls  # where the member serves /metrics (Status says)
        self.callers = callers  # who a call is made as (None: no auth)
        self.machine = machine
        self.mode = mode
        self.local = local  # its member-local sessions, counted in Status
        self.hub = hub  # with a CoordMachine: the inspection RPCs (api/console_views.py)
        self.tracker = tracker
        self.data_path = data_path  # the member's storage file, for its size

    def status_response(self) -> admin_pb2.StatusResponse:
        node = self.node
        st = node.status()
        learners = st.conf_state.learners
        resp = admin_pb2.StatusResponse(
            id=st.id,
            name=node.me.name,
            role=st.role.label,
            term=st.term,
            leader_id=st.leader,
            leader_name=node.name_of(st.leader),
            commit_index=st.commit,
            applied_index=node.applied_index,
            last_index=st.last_index,
            first_index=st.first_index,
            has_quorum=st.has_quorum,
            snapshot_index=st.snapshot_index,
            quorum_lost_ms=int(node.quorum_lost_for() * 1000),
            state_machine=json.dumps(self.machine.describe(), sort_keys=True),
            cluster_id=node.cluster_id,
            mode=self.mode.mode if self.mode is not None else "",
            local_sessions=len(self.local) if self.local is not None else 0,
            version=VERSION,
            data_bytes=console_views.storage_bytes(self.data_path),
            round_counts=node.round_counts.as_dict(),
            metrics_urls=self.metrics_urls(),
        )
        for mid, m in sorted(node.members.items(), key=lambda kv: kv[1].name):
            resp.members.add(
                id=mid,
                name=m.name,
                peer_address=m.peer_address,
                client_address=m.client_address,
                learner=mid in learners,
            )
        for pid, pr in sorted(st.progress.items()):
            resp.progress.add(
                id=pid,
                name=node.name_of(pid),
                match_index=pr.match,
                next_index=pr.next,
                state=pr.state,
                recent_active=pr.recent_active,
                learner=pr.learner,
            )
        return resp

    async def Status(self, request, context):  # noqa: N802
        return self.status_response()

    async def WatchStatus(self, request, context):  # noqa: N802
        async for ev in self.node.events():
            yield admin_pb2.StatusEvent(
                term=ev.term,
                leader_id=ev.leader,
                role=ev.role.label,
                has_quorum=ev.has_quorum,
                unix_ms=ev.unix_ms,
            )

    async def Propose(self, request, context):  # noqa: N802
        if not request.data:
            await abort(context, INVALID, "EMPTY_COMMAND", "data must not be empty")
        if len(request.data) > MAX_PROPOSAL_BYTES:
            await abort(
                context,
                INVALID,
                "COMMAND_TOO_LARGE",
                f"data is {len(request.data)} bytes; the limit is {MAX_PROPOSAL_BYTES}",
            )
        data = await self._proposed_as_caller(context, request.data)
        try:
            applied = await self.node.propose(data)
        except NodeError as e:
            await abort_node_error(context, e)
        return admin_pb2.ProposeResponse(
            index=applied.index, term=applied.term,
            result=b"" if applied.result is None else applied.result.data
        )

    async def ReadIndex(self, request, context):  # noqa: N802
        try:
            index = await self.node.read_index()
        except NodeError as e:
            await abort_node_error(context, e)
        return admin_pb2.ReadIndexResponse(index=index)

    async def _caller(self, context, catch_up: bool = True) -> str | None:
        """The caller's user once this member has caught up (`catch_up`; else as this
        member knows users now); None while auth is off."""
        callers = self.callers
        if callers is None or not callers.auth.enabled:
            return None
        timeout = call_timeout(context)
        try:
            if catch_up:
                await callers.barrier(timeout)
            return await callers.user(context, timeout)
        except NodeError as e:
            await abort_node_error(context, e)
        except ApiError as e:
            await e.abort(context)
        raise AssertionError("abort raises")

    async def _allowed(self, context, need: Need, catch_up: bool = True) -> str:
        """Refuse a caller without `need` (nothing while auth is off); the caller's user
        ("" while auth is off)."""
        user = await self._caller(context, catch_up)
        if user is not None and not holds(self.callers.auth, user, need):
            await denied(user, need).abort(context)
        return user or ""

    async def _proposed_as_caller(self, context, data: bytes) -> bytes:
        user = await self._caller(context)
        if user is None:
            return data
        try:
            cmd = c.decode_command(data)
        except ValueError as e:
            await abort(context, INVALID, "INVALID_ARGUMENT", f"undecodable command: {e}")
        if type(cmd) not in CHECKED:
            if not self.callers.auth.is_admin(user):
                await abort(context, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED",
                            f"user {user!r:.60} lacks the root role, which a raw proposal of "
                            f"{type(cmd).__name__} needs")
            return data
        native = {"native": True} if hasattr(cmd, "native") else {}
        return c.encode_command(dataclasses.replace(cmd, actor=user, **native))

    async def TransferLeader(self, request, context):  # noqa: N802
        await self._allowed(context, next(resource(ADMIN, "transfer", True)))
        target = member_id(request.to_name)
        if target not in self.node.members:
            await abort(context, INVALID, "UNKNOWN_MEMBER", f"no member named {request.to_name!r}")
        try:
            leader = await self.node.transfer_leader(target)
        except NodeError as e:
            await abort_node_error(context, e)
        return admin_pb2.TransferLeaderResponse(leader_id=leader)

    async def AddMember(self, request, context):  # noqa: N802
        user = await self._allowed(context, next(resource(ADMIN, "membership", True)))
        try:
            validate_address(request.peer_address)
            if not request.name:
                raise ValueError("name must not be empty")
        except ValueError as e:
            await abort(context, INVALID, "BAD_MEMBER", str(e))
        info = MemberInfo(request.name, request.peer_address, request.client_address)
        kind = ConfChangeType.ADD_LEARNER if request.learner else ConfChangeType.ADD_VOTER
        if kind is ConfChangeType.ADD_VOTER and info.id in self.node.members:
            await self._check_promotable(context, info)
        await self._change(context, ConfChange(kind, info.id, info.change_context(user)))
        return self._membership()

    PROMOTE_MAX_LAG = 1000
    """A learner may become a voter only when this close to the leader's log: promoting
    one that cannot keep up would make it count towards the quorum it cannot join."""

    async def _check_promotable(self, context, info: MemberInfo) -> None:
        st = self.node.status()
        if not self.node.is_leader:
            await abort_node_error(context, NotLeader(self.node.leader))
        pr = st.progress.get(info.id)
        if pr is None or not pr.learner:
            return  # already a voter: nothing to check (the change is a no-op)
        if not pr.recent_active or st.last_index - pr.match > self.PROMOTE_MAX_LAG:
            await abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "LEARNER_NOT_CAUGHT_UP",
                f"learner {info.name} has not caught up (match {pr.match} of {st.last_index},"
                f" {'active' if pr.recent_active else 'not heard from'}); promote it later",
            )

    async def RemoveMember(self, request, context):  # noqa: N802
        user = await self._allowed(context, next(resource(ADMIN, "membership", True)))
        target = member_id(request.name)
        if target not in self.node.members:
            await abort(context, INVALID, "UNKNOWN_MEMBER", f"no member named {request.name!r}")
        gone = self.node.members[target]  # named in the context for the history
        await self._change(context, ConfChange(ConfChangeType.REMOVE_NODE, target,
                                               gone.change_context(user)))
        return self._membership()

    async def _change(self, context, cc: ConfChange) -> None:
        try:
            await self.node.change_membership(cc)
        except NodeError as e:
            await abort_node_error(context, e)

    async def ListSessions(self, request, context):  # noqa: N802
        return console_views.list_sessions(self.node, await self._coord_machine(context),
                                           self.tracker)

    async def ListProducers(self, request, context):  # noqa: N802
        return console_views.list_producers(await self._coord_machine(context))

    async def WatchOwnership(self, request, context):  # noqa: N802
        machine, hub = await self._inspected(context)
        async for change in console_views.watch_ownership(machine, hub, context):
            yield change

    async def WatchSessions(self, request, context):  # noqa: N802
        machine, hub = await self._inspected(context)
        async for change in table_streams.watch_sessions(
                self.node, machine, hub, self.tracker, request.after_index, context):
            yield change

    async def WatchProducers(self, request, context):  # noqa: N802
        machine, hub = await self._inspected(context)
        async for change in table_streams.watch_producers(
                self.node, machine, hub, request.after_index, context):
            yield change

    async def _inspected(self, context) -> tuple[CoordMachine, EventHub]:
        """The machine and event hub an inspection stream reads (UNIMPLEMENTED without)."""
        machine = await self._coord_machine(context)
        if self.hub is None:
            await abort(context, grpc.StatusCode.UNIMPLEMENTED, "NOT_SUPPORTED",
                        "this member serves no inspection streams")
        return machine, self.hub

    async def _coord_machine(self, context) -> CoordMachine:
        """The machine the inspection reads show, to a caller allowed to inspect."""
        await self._allowed(context, INSPECTION, catch_up=False)
        if not isinstance(self.machine, CoordMachine):
            await abort(context, grpc.StatusCode.UNIMPLEMENTED, "NOT_SUPPORTED",
                        "this member does not replicate coord's state machine")
        return self.machine

    def _membership(self) -> admin_pb2.MembershipResponse:
        return admin_pb2.MembershipResponse(members=self.status_response().members)
