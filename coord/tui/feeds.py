"""The console's live connections to the cluster: each keeps one part of the model
current from a watch stream and reconnects by itself through failover.

- members: every member's `WatchStatus` stream; a leader or quorum change on any member
  re-reads every member's status (a paused member's status read times out: unreachable),
  as does a burst of writes (at most once a second) and a slow reconciliation;
- owners: `WatchOwnership` (every group; a reopened stream relists and sweeps);
- keys: a listing of every key, then a KV watch from the revision after it;
- sessions: `WatchSessions` (each session's row, then every change: opened, what it
  holds, ended and why), opened at the leader, the only member that knows how long a
  session has left;
- producers: `WatchProducers` (pid blocks, leases, producer epochs, then changes);
- users and roles: read when their view is shown or `r` asks (no stream tells of
  changes to them; etcd lets only the root role list them).
A feed the cluster refuses (PERMISSION_DENIED: the console's user lacks a permission)
says so in the model (`ClusterModel.refused`, which the app flashes and the view's title
shows) and is tried again, as any failed feed, in case the permission is granted.
A reopened table stream resumes from the log index it reached and lists again; the
model keeps what the listing names. Member status is also re-read every `RECONCILE_S`
(a slow reconciliation); nothing else is read on a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from coord.client import AsyncClient
from coord.client.admin_aio import AsyncAdmin
from coord.client.aio_stream import AsyncStream
from coord.client.errors import CoordError
from coord.tui.model import ClusterModel, KeyRow, MemberRow, RoleRow, UserRow
from coord.tui.pulse import reachable_url

log = logging.getLogger("coord.tui")

RECONCILE_S = 5.0
STATUS_MIN_GAP_S = 1.0  # writes re-read member status at most this often
BACKOFF_S = (0.2, 0.5, 1.0, 2.0)
MODE_SETTLE_S = (0.5, 1.5, 3.0)  # after a quorum change: the member's mode follows later
LEADER_WAIT_S = 2.0  # the sessions stream waits this long for a leader to open it at


class Feeds:
    """Starts the feeds on the running loop; `stop()` ends them."""

    def __init__(self, client: AsyncClient, model: ClusterModel) -> None:
        self.client = client
        self.admin = AsyncAdmin(client)
        self.model = model
        self._tasks: list[asyncio.Task] = []
        self._watched: set[str] = set()
        self._status_wanted = asyncio.Event()
        self._closed = False
        self._status_pending = False  # a throttled status re-read is scheduled
        # the table streams: the log index each has reached (a reopened one resumes
        # there), the stream open now, and the leader the sessions stream last moved to
        self._index = {"sessions": 0, "producers": 0}
        self._streams: dict[str, AsyncStream] = {}
        self._moved_to = ""
        self._sessions_on_leader = False
        self._leader_seen = asyncio.Event()

    def start(self) -> None:
        self.model.serving = self.client.ring.current()[1]
        for endpoint in self.client.endpoints:
            self._watch_member(endpoint)
        for job, view in ((self._statuses, "members"), (self._ownership, "owners"),
                          (self._keys, "keys"), (self._sessions, "sessions"),
                          (self._producers, "producers")):
            self._spawn(job, view)

    async def stop(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task

    def kick_status(self) -> None:
        self._status_wanted.set()

    def relist(self) -> None:
        """Reopen the sessions and producers streams: each lists its table again."""
        for stream in self._streams.values():
            stream.cancel()

    def _spawn(self, job: Callable[[], Awaitable[None]], view: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._forever(job, view)))

    async def _forever(self, job: Callable[[], Awaitable[None]], view: str) -> None:
        """Run `job` (which keeps `view` current) again after it fails, with a growing
        pause, until stopped."""
        failures = 0
        while not self._closed:
            try:
                await job()
                failures = 0
            except asyncio.CancelledError:
                raise
            except CoordError as e:
                if e.reason == "PERMISSION_DENIED":
                    self.model.refused(view, e.message)
                log.debug("feed %s failed: %s", getattr(job, "__name__", job), e)
                failures += 1
            except Exception as e:  # noqa: BLE001  (a feed never takes the console down)
                log.debug("feed %s failed: %s", getattr(job, "__name__", job), e)
                failures += 1
            await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])

    # -- members --------------------------------------------------------------------------
    def _watch_member(self, endpoint: str) -> None:
        if endpoint and endpoint not in self._watched:
            self._watched.add(endpoint)

            async def watch() -> None:
                await self._member_stream(endpoint)
            watch.__name__ = f"status {endpoint}"
            self._spawn(watch, "members")

    async def _member_stream(self, endpoint: str) -> None:
        stream = self.admin.watch_status(endpoint)
        try:
            await self._read_status(endpoint)
            while True:
                ev = await stream.read()
                if ev is None:
                    raise CoordError("STREAM_ENDED", "the member ended its status stream")
                self.kick_status()
                self._settle_mode()
        finally:
            stream.cancel()

    def _settle_mode(self) -> None:
        """A quorum change is followed by a mode change once the member's grace ends."""
        loop = asyncio.get_running_loop()
        for delay in MODE_SETTLE_S:
            loop.call_later(delay, self._status_wanted.set)

    async def _read_status(self, endpoint: str) -> None:
        model = self.model
        old = model.member_for(endpoint)
        try:
            st = await self.admin.status(endpoint)
        except CoordError as e:
            row = old or MemberRow(name=endpoint, endpoint=endpoint)
            if row.reachable:
                model.event("member", f"{row.name} unreachable ({e})")  # e.g. TLS refused
            model.members.put(row.name, replace(row, reachable=False, error=e.reason))
            raise
        model.cluster_id = st.cluster_id
        learner = any(m.learner for m in st.members if m.id == st.id)
        row = MemberRow(
            name=st.name, endpoint=endpoint, id=st.id, role=st.role, term=st.term,
            leader=st.leader_name, commit=st.commit_index, applied=st.applied_index,
            learner=learner, has_quorum=st.has_quorum, quorum_lost_ms=st.quorum_lost_ms,
            mode=st.mode, version=st.version, data_bytes=st.data_bytes, reachable=True,
            peer_address=next((m.peer_address for m in st.members if m.id == st.id), ""),
        )
        if old is None or old.name != row.name:
            model.members.remove(endpoint)  # the placeholder named after the endpoint
        elif old.reachable:
            if old.leader != row.leader and row.leader:
                model.event("leader", f"{row.name}: leader is now {row.leader} "
                            f"(term {row.term})")
            if old.has_quorum != row.has_quorum:
                gained = "regained" if row.has_quorum else "lost"
                model.event("quorum", f"{row.name}: quorum {gained}")
            if old.mode != row.mode and row.mode:
                model.event("mode", f"{row.name}: {old.mode or '?'} → {row.mode}")
        else:
            model.event("member", f"{row.name} reachable again")
        model.members.put(row.name, row)
        for url in st.metrics_urls:  # the pulse view scrapes it
            model.pulses.add(reachable_url(url, endpoint))
        if model.leader() is not None:
            self._leader_seen.set()
            self._sessions_to_leader()
        for m in st.members:  # members added since (learners) are watched too
            if m.client_address:
                self._watch_member(m.client_address)
        known = {m.name for m in st.members}
        for name in [n for n, r in model.members.rows.items()
                     if r.reachable and n not in known and r.endpoint not in self.client.endpoints]:
            model.members.remove(name)

    async def _statuses(self) -> None:
        """Re-read every member's status when asked (a change), else every RECONCILE_S."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._status_wanted.wait(), RECONCILE_S)
            self._status_wanted.clear()
            self.model.serving = self.client.ring.current()[1]
            await asyncio.gather(*(self._read_status_quietly(e) for e in sorted(self._watched)))
            await asyncio.sleep(STATUS_MIN_GAP_S / 4)

    async def _read_status_quietly(self, endpoint: str) -> None:
        with contextlib.suppress(CoordError):
            await self._read_status(endpoint)

    def _wrote(self) -> None:
        """Writes move commit indexes: re-read member status, throttled."""
        loop = asyncio.get_running_loop()
        if not self._status_pending:
            self._status_pending = True

            def fire() -> None:
                self._status_pending = False
                self._status_wanted.set()
            loop.call_later(STATUS_MIN_GAP_S, fire)

    # -- owners ---------------------------------------------------------------------------
    async def _ownership(self) -> None:
        model = self.model
        listing: set[tuple[str, str]] | None = None
        stream = self.admin.watch_ownership()
        try:
            async for change in stream:
                if change.kind == "listed":
                    model.loading.discard("owners")
                    model.served("owners")
                    for key in [k for k in model.owners if listing is None or k not in listing]:
                        model.owners.remove(key)
                    listing = None
                    model.revision = max(model.revision, change.owner.revision)
                    continue
                if change.kind == "mode":
                    model.serving_mode = change.mode
                    model.event("mode", f"{model.serving}: {change.mode}")
                    self.kick_status()
                    continue
                if change.snapshot:
                    if listing is None:
                        listing = set()
                        model.loading.add("owners")
                    listing.add((change.group, change.owner.resource))
                else:
                    self._wrote()
                model.owner_change(change.group, change.owner, change.kind, change.snapshot)
        finally:
            model.loading.discard("owners")
            stream.cancel()

    # -- keys -----------------------------------------------------------------------------
    async def _keys(self) -> None:
        model = self.model
        listed = await self.client.range(prefix="", serializable=False)
        rows = {kv.key: KeyRow(kv.key, kv.value, kv.create_revision, kv.mod_revision,
                               kv.version, kv.session_id) for kv in listed.kvs}
        model.keys.replace_all(rows)
        model.served("keys")
        revision = listed.header.revision
        model.revision = max(model.revision, revision)
        stream = self.client.watch(prefix="", from_revision=revision + 1)
        try:
            async for ev in stream:
                if ev.type == "MODE":
                    model.serving_mode = ev.mode
                    continue
                model.key_change(ev.type, ev.kv)
                self._wrote()
        finally:
            stream.cancel()

    # -- users and roles ------------------------------------------------------------------
    async def read_auth(self, view: str) -> None:
        """Read the users or the roles (`view`) again."""
        try:
            await (self._users() if view == "users" else self._roles())
            self.model.served(view)
        except CoordError as e:
            if e.reason != "PERMISSION_DENIED":
                raise
            self.model.refused(view, f"{e.message} (etcd lets only the root role list "
                               f"{view})")

    async def _users(self) -> None:
        users = await self.admin.users()
        self.model.users.replace_all({u.name: UserRow(u.name, u.roles) for u in users})

    async def _roles(self) -> None:
        roles = await self.admin.roles()
        self.model.roles.replace_all({r.name: RoleRow(r.name, tuple(map(str, r.perms)))
                                      for r in roles})

    # -- sessions and producers -----------------------------------------------------------
    async def _sessions(self) -> None:
        """`WatchSessions`, opened at the leader when one is known (only it says how long
        sessions have left; at start, the first status reads name it), and reopened
        there when served elsewhere (`_sessions_to_leader`)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._leader_seen.wait(), LEADER_WAIT_S)
        leader = self.model.leader()
        at = leader.endpoint if leader is not None else None
        self._moved_to = at or self._moved_to
        stream = self.admin.watch_sessions(self._index["sessions"], at)
        self._streams["sessions"] = stream
        try:
            async for change in stream:
                self._index["sessions"] = max(self._index["sessions"], change.index)
                self._sessions_on_leader = change.leader
                self.model.session_change(change)
                self._sessions_to_leader()
        finally:
            self.model.loading.discard("sessions")
            stream.cancel()

    def _sessions_to_leader(self) -> None:
        """Reopen the sessions stream at the leader if another member serves it (the
        stream then relists, with the time each session has left); once per leader, so
        a leader that cannot be reached is not tried again and again."""
        leader = self.model.leader()
        stream = self._streams.get("sessions")
        if (self._sessions_on_leader or leader is None or stream is None
                or leader.endpoint == self._moved_to):
            return
        self._moved_to = leader.endpoint
        stream.cancel()  # `_forever` opens it again, at the leader

    async def _producers(self) -> None:
        stream = self.admin.watch_producers(self._index["producers"])
        self._streams["producers"] = stream
        try:
            async for change in stream:
                self._index["producers"] = max(self._index["producers"], change.index)
                self.model.producer_change(change)
        finally:
            self.model.loading.discard("producers")
            stream.cancel()
