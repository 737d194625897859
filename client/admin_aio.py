"""`AsyncAdmin`: the Admin service on an `AsyncClient`'s connections, for consoles
(`coord tui`) and tools that run on an event loop.

Member status is per member (each answers for itself), so `status` and `watch_status`
name the endpoint; the inspection reads fail over like any read; `watch_ownership` is an
`AsyncStream` that reopens itself on the next member (with a fresh listing), as do
`watch_sessions` and `watch_producers` (client/admin_streams.py). Membership
changes and leadership transfer go to the endpoint the caller names (the leader).
`users` and `roles` read etcd's Auth service (on the member the client uses now), with
every permission kind coord has; etcd lets only the root role list them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from coord.client.admin_streams import (
    FirstAt,
    ProducerChange,
    SessionChange,
    producers_cursor,
    sessions_cursor,
)
from coord.client.aio import AsyncClient
from coord.client.aio_stream import AsyncStream
from coord.client.calls import Call
from coord.client.cursors import Unpinned
from coord.client.errors import CoordError, from_rpc_error
from coord.client.results import OwnerChange, owner_change
from coord.client.retry import stream_may_resume
from coord.client.transport import StreamCall
from coord.etcdpb import auth_pb2, rpc_pb2
from coord.v1 import admin_pb2

__all__ = ["AsyncAdmin", "OwnershipCursor", "Permission", "RoleInfo", "UserInfo"]

@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Permission:
    """One grant of a role: `kind` is "kv" (etcd's keys) or a native resource kind."""

    kind: str
    type: str  # READ | WRITE | READWRITE
    key: bytes
    range_end: bytes

    @property
    def where(self) -> str:
        """The key, or the range as etcdctl prints it."""
        k = self.key.decode("utf-8", "replace")
        if not self.range_end:
            return k
        if self.range_end == b"\0":
            return f"[{k}, <open ended>"
        return f"[{k}, {self.range_end.decode('utf-8', 'replace')})"

    def __str__(self) -> str:
        return f"{self.kind} {self.type} {self.where}"


@dataclass(frozen=True, slots=True)
class RoleInfo:
    name: str
    perms: tuple[Permission, ...]


class OwnershipCursor(Unpinned):
    """The position of a WatchOwnership stream: always a fresh listing (the server keeps
    no all-groups history), ended by an entry of kind "listed"; consumers treat a listing
    as "the current state" and drop what it no longer names."""

    service = "Admin"
    method = "WatchOwnership"

    def request(self) -> admin_pb2.WatchOwnershipRequest:
        return admin_pb2.WatchOwnershipRequest()

    def feed(self, response: Any) -> list[OwnerChange]:
        if response.kind == "listed":
            return [OwnerChange("", owner_change(response).owner, True, "listed")]
        return [owner_change(response)]

    def on_error(self, err: CoordError) -> bool:
        return stream_may_resume(err)


def _same(response: Any) -> Any:
    return response


class AsyncAdmin:
    """Admin calls over `client`'s transports (the client owns and closes them)."""

    def __init__(self, client: AsyncClient, timeout: float = 2.0) -> None:
        self.client = client
        self.timeout = timeout

    async def _unary(self, endpoint: str, method: str, request: Any,
                     timeout: float | None = None, service: str = "Admin") -> Any:
        try:
            transport = self.client.transport(endpoint)
            metadata = await self.client.call_metadata(transport, self.timeout)
            return await transport.unary(
                service, method, request, timeout=timeout or self.timeout, metadata=metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def _auth_read(self, method: str, request: Any) -> Any:
        """An Auth read on the member the client uses now; a token that member no longer
        knows is renewed once (a console stays up longer than a token lives)."""
        endpoint = self.client.ring.current()[1]
        try:
            return await self._unary(endpoint, method, request, service="Auth")
        except CoordError as e:
            if not self.client.token_expired(e):
                raise
        return await self._unary(endpoint, method, request, service="Auth")

    async def users(self) -> list[UserInfo]:
        """Every user and its roles, by name (PERMISSION_DENIED without the root role
        while auth is on, as etcd)."""
        names = (await self._auth_read("UserList", rpc_pb2.AuthUserListRequest())).users
        return [UserInfo(name, tuple((await self._auth_read(
            "UserGet", rpc_pb2.AuthUserGetRequest(name=name))).roles)) for name in names]

    async def roles(self) -> list[RoleInfo]:
        """Every role and its permissions of every kind, by name (as `users`)."""
        names = (await self._auth_read("RoleList", rpc_pb2.AuthRoleListRequest())).roles
        roles = []
        for name in names:
            got = await self._auth_read("RoleGet", rpc_pb2.AuthRoleGetRequest(
                role=name, coord_kinds=True))
            roles.append(RoleInfo(name, tuple(
                Permission(p.coord_kind or "kv", auth_pb2.Permission.Type.Name(p.permType),
                           p.key, p.range_end) for p in got.perm)))
        return roles

    async def status(self, endpoint: str) -> admin_pb2.StatusResponse:
        return await self._unary(endpoint, "Status", admin_pb2.StatusRequest())

    def watch_status(self, endpoint: str) -> StreamCall:
        """One member's leader and quorum changes; `read()` them, `cancel()` to stop. It
        does not fail over: the stream is about that member."""
        return self.client.transport(endpoint).server_stream(
            "Admin", "WatchStatus", admin_pb2.WatchStatusRequest(), metadata=())

    async def list_sessions(self, endpoint: str | None = None
                            ) -> admin_pb2.ListSessionsResponse:
        """Every session with what it holds; ask the leader (`endpoint`) for the time
        each has left, else any member answers (remaining_ms -1)."""
        req = admin_pb2.ListSessionsRequest()
        if endpoint is not None:
            try:
                return await self._unary(endpoint, "ListSessions", req)
            except CoordError:
                pass  # the leader moved or died: any member will do
        return await self.client.send(Call("Admin", "ListSessions", req, _same, safe=True))

    async def list_producers(self) -> admin_pb2.ListProducersResponse:
        req = admin_pb2.ListProducersRequest()
        return await self.client.send(Call("Admin", "ListProducers", req, _same, safe=True))

    def watch_ownership(self) -> AsyncStream[OwnerChange]:
        """Every group's owners, then changes; reopens itself on the next member."""
        return AsyncStream(self.client, OwnershipCursor())

    def watch_sessions(self, after_index: int = 0, endpoint: str | None = None
                       ) -> AsyncStream[SessionChange]:
        """Every session, then changes (client/admin_streams.py); opens at `endpoint`
        first if given (the leader, which knows how long each session has left), and
        reopens itself on the next member."""
        link = self.client if endpoint is None else FirstAt(self.client, endpoint)
        return AsyncStream(link, sessions_cursor(after_index))

    def watch_producers(self, after_index: int = 0) -> AsyncStream[ProducerChange]:
        """The pid blocks, leases and producers, then changes; reopens itself."""
        return AsyncStream(self.client, producers_cursor(after_index))

    async def transfer_leader(self, endpoint: str, to_name: str) -> int:
        req = admin_pb2.TransferLeaderRequest(to_name=to_name)
        return (await self._unary(endpoint, "TransferLeader", req, timeout=10.0)).leader_id

    async def add_member(self, endpoint: str, name: str, peer_address: str,
                         client_address: str = "", learner: bool = True
                         ) -> admin_pb2.MembershipResponse:
        req = admin_pb2.AddMemberRequest(name=name, peer_address=peer_address,
                                         client_address=client_address, learner=learner)
        return await self._unary(endpoint, "AddMember", req, timeout=15.0)

    async def remove_member(self, endpoint: str, name: str) -> admin_pb2.MembershipResponse:
        req = admin_pb2.RemoveMemberRequest(name=name)
        return await self._unary(endpoint, "RemoveMember", req, timeout=15.0)
