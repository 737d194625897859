"""Who an etcd call is made as, and what etcd 3.4 lets that user do before the call is
served.

The caller is found as on the native API (`coord.server.requests.callers`: its token,
or its verified certificate's common name). A token is checked whenever one is sent, auth
on or off, as etcd does: one this member does not know is etcd's `invalid auth token`.
A call without a user ("" here) is refused, while auth is on, whatever needs a user
(`user name is empty`).

What a named user may do with keys is checked where the command applies (the command
carries the user: `coord.sm.auth_checks`), so a permission revoked before the command
commits holds; reads and watches, served from this member's state, are checked here,
after the read barrier, and so are the lease calls that never become a command: a
keepalive (which renews the lease on the leader's clock) and a TimeToLive that lists
the lease's keys. Auth administration needs the root role, but for a user's own
record and the roles it holds, which it may read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc

from coord.server.etcd import errors as err
from coord.server.requests.callers import InvalidToken
from coord.server.requests.coordinator import Coordinator, call_timeout
from coord.sm.access import lacking
from coord.sm.auth import AuthStore
from coord.sm.auth_checks import permitted
from coord.wire import ApiError


class EtcdAccess:
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    @property
    def auth(self) -> AuthStore:
        return self.coord.machine.auth

    async def user(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's user ("" for none); etcd's `invalid auth token` for a token this
        member does not know once it has caught up with the leader, and etcd's error for
        why it could not catch up (`no leader`, `request timed out`, ...) when it could
        not."""
        try:
            return await self.coord.callers.user(context, call_timeout(context))
        except InvalidToken:
            raise err.INVALID_AUTH_TOKEN from None
        except ApiError as e:
            raise err.from_exception(e) from None

    async def made_as(self, cmd: Any, context: grpc.aio.ServicerContext) -> Any:
        """`cmd` made as the caller, for apply to check; a caller without a user is
        refused now, while auth is on, if `cmd` needs any permission (`check_now`)."""
        user = await self.user(context)
        if user:
            return dataclasses.replace(cmd, actor=user)
        self.check_now("", cmd)
        return cmd

    def check_now(self, user: str, cmd: Any) -> None:
        """Refuse now, as apply would refuse `cmd` made as `user` (etcd's errors), what
        is served without a command: a lease keepalive is checked as the revoke of its
        lease, for whoever may end the lease's keys (and a native session's name) may
        keep them."""
        if not self.auth.enabled:
            return
        if lacking(self.auth, self.coord.machine.sessions, user, cmd) is not None:
            raise err.PERMISSION_DENIED if user else err.USER_EMPTY

    def check_lease_keys_read(self, user: str, lease_id: int) -> None:
        """Refuse, as etcd 3.4.26 on, a TimeToLive listing lease `lease_id`'s keys to
        `user` unless it may read every one (a lease without keys, or none at all,
        still needs a user while auth is on)."""
        if not self.auth.enabled:
            return
        if not user:
            raise err.USER_EMPTY
        session = self.coord.machine.sessions.get(lease_id)
        for key in session.keys if session is not None else ():
            if not permitted(self.auth, user, key, b"", False):
                raise err.PERMISSION_DENIED

    def check_read(self, user: str, key: bytes, range_end: bytes) -> None:
        """Refuse, as etcd, a read of `key` (or [key, range_end)) by `user`."""
        if not self.auth.enabled:
            return
        if not user:
            raise err.USER_EMPTY
        if not permitted(self.auth, user, key, range_end, False):
            raise err.PERMISSION_DENIED

    def check_admin(self, user: str, allowed: bool = False) -> None:
        """Refuse, as etcd, auth administration by `user` (`allowed`: a read of its own
        record, which for etcd includes a caller without a user reading the user named
        "", or of a role it holds)."""
        if not self.auth.enabled or allowed:
            return
        if not user:
            raise err.USER_EMPTY
        if not self.auth.is_admin(user):
            raise err.PERMISSION_DENIED

    async def admin(self, context: grpc.aio.ServicerContext) -> str:
        """The caller of an administrative call, refused as etcd refuses one who may not:
        the caller of a change is checked again when it applies."""
        user = await self.user(context)
        self.check_admin(user)
        return user

    async def maintenance_admin(self, context: grpc.aio.ServicerContext) -> None:
        """etcd's check on Hash, HashKV, Defragment and Snapshot: the root role while
        auth is on, refused in etcd's untranslated words."""
        try:
            await self.admin(context)
        except err.EtcdError as e:
            raise err.untranslated(e) from None
