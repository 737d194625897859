"""What the console knows about the cluster, kept current by the feeds (`feeds.py`) and
drawn by the views. Plain data, no textual and no I/O, so it is tested on its own.

Each table records which of its rows changed since the views last drew it (`Table.take`),
so a view updates those rows only: with 10,000 owners a change costs one row, not a
reload.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from coord.tui.pulse import Pulses

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

EVENTS_KEPT = 5000
RENEWED_AFTER_MS = 1000


class Table(Generic[K, V]):
    """Rows by key, plus the keys changed (upserted or removed) since the last `take`."""

    def __init__(self) -> None:
        self.rows: dict[K, V] = {}
        self._changed: set[K] = set()
        self.version = 0  # bumps on every change (a view redraws if it moved)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[K]:
        return iter(self.rows)

    def get(self, key: K) -> V | None:
        return self.rows.get(key)

    def put(self, key: K, row: V) -> None:
        if self.rows.get(key) != row:
            self.rows[key] = row
            self._changed.add(key)
            self.version += 1

    def remove(self, key: K) -> None:
        if self.rows.pop(key, None) is not None:
            self._changed.add(key)
            self.version += 1

    def replace_all(self, rows: dict[K, V]) -> None:
        """A fresh listing: rows it no longer names are removed."""
        for key in [k for k in self.rows if k not in rows]:
            self.remove(key)
        for key, row in rows.items():
            self.put(key, row)

    def take(self) -> set[K]:
        changed, self._changed = self._changed, set()
        return changed


@dataclass(frozen=True)
class MemberRow:
    name: str
    endpoint: str
    id: int = 0
    role: str = "?"
    term: int = 0
    leader: str = ""
    commit: int = 0
    applied: int = 0
    learner: bool = False
    has_quorum: bool = False
    quorum_lost_ms: int = 0
    mode: str = ""
    version: str = ""
    data_bytes: int = 0
    revision: int = 0
    reachable: bool = True
    error: str = ""
    peer_address: str = ""

    @property
    def lag(self) -> int:
        return max(0, self.commit - self.applied)


@dataclass(frozen=True)
class OwnerRow:
    group: str
    resource: str
    session_id: int
    generation: int
    revision: int
    seen_at: float  # wall time this console saw the claim (or the listing)


@dataclass(frozen=True)
class SessionRow:
    id: int
    name: str
    ttl_ms: int
    read_only_ok: bool
    remaining_ms: int  # at `fetched_at`; -1: unknown (no leader answered)
    fetched_at: float  # monotonic
    owned: tuple[tuple[str, str], ...]
    keys: tuple[bytes, ...]

    def left_ms(self, now: float) -> int:
        """Counting down from the leader's deadline as streamed; -1 unknown. Keepalives
        move that deadline on the leader only (never replicated, so no stream says so):
        this is the least the session has left, and once it ran out with the session
        still listed, a keepalive renewed it (`renewed`)."""
        if self.remaining_ms < 0:
            return -1
        return max(0, self.remaining_ms - int((now - self.fetched_at) * 1000))

    def renewed(self, now: float) -> bool:
        """Past the streamed deadline by more than the leader takes to expire a session
        (it sweeps every 100 ms): still listed, so a keepalive moved the deadline."""
        return self.remaining_ms >= 0 and (
            (now - self.fetched_at) * 1000 - self.remaining_ms > RENEWED_AFTER_MS)


@dataclass(frozen=True)
class KeyRow:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    session_id: int


@dataclass(frozen=True)
class EventRow:
    seq: int
    at: float  # wall time
    kind: str  # leader | quorum | mode | grant | reset | release | expire | sever | put | ...
    text: str


@dataclass(frozen=True)
class UserRow:
    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class RoleRow:
    name: str
    perms: tuple[str, ...]  # each as `coord role get` prints it: kind TYPE key-or-range


@dataclass
class Producers:
    """The pid tables: blocks by (requester, start) as (requester, start, size,
    revision); leases by pid as (pid, epoch, expire_ms, topic, partition); producers by
    transactional id as (producer_key, pid, epoch)."""

    revision: int = 0
    next_pid: int = 0
    clock_ms: int = 0  # the replicated clock (leader wall time) of the latest entry
    clock_seen: float | None = None  # when that entry arrived (monotonic); None: fixed
    version: int = 0  # bumps on every entry (the view redraws its title if it moved)
    blocks: Table[tuple[str, int], tuple] = field(default_factory=Table)
    leases: Table[int, tuple] = field(default_factory=Table)
    producers: Table[str, tuple] = field(default_factory=Table)

    def now_ms(self, mono: float) -> int:
        """The cluster's clock now, counted on from the latest entry's (lease expiries
        are given in it; the stream says nothing while nothing changes)."""
        if self.clock_seen is None:
            return self.clock_ms
        return self.clock_ms + int((mono - self.clock_seen) * 1000)


class ClusterModel:
    """The console's picture of the cluster. `wall` and `mono` are the clocks (fixed ones
    make snapshot tests repeatable)."""

    def __init__(self, wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.wall = wall
        self.mono = mono
        self.members: Table[str, MemberRow] = Table()
        self.owners: Table[tuple[str, str], OwnerRow] = Table()
        self.sessions: Table[int, SessionRow] = Table()
        self.keys: Table[bytes, KeyRow] = Table()
        self.producers = Producers()
        self.users: Table[str, UserRow] = Table()
        self.roles: Table[str, RoleRow] = Table()
        self.pulses = Pulses()  # the members' metrics, scraped for the pulse view
        # what the cluster refused the console's user (PERMISSION_DENIED), by the view
        # it leaves empty; `denials` counts refusals, so the app flashes each new one
        self.denied: dict[str, str] = {}
        self.denials = 0
        self.events: collections.deque[EventRow] = collections.deque(maxlen=EVENTS_KEPT)
        self.events_seq = 0
        self.revision = 0
        self.cluster_id = 0
        self.serving = ""  # the endpoint the console talks to
        self.serving_mode = ""  # its mode as its streams last said
        # tables whose listing is arriving: views wait for its end and draw it at once
        # (drawing a 10,000-row listing row batch by row batch starves the feeds)
        self.loading: set[str] = set()
        # what the listing arriving on each table stream named so far (a reopened stream
        # lists again: rows it does not name went away meanwhile), and the tables whose
        # first listing is done (from then on a new row is news: an event says so)
        self._listing: dict[str, set] = {}
        self._listed: set[str] = set()

    # -- members --------------------------------------------------------------------------
    def leader(self) -> MemberRow | None:
        """The leader as the reachable members with the highest term see it."""
        live = [m for m in self.members.rows.values() if m.reachable]
        if not live:
            return None
        term = max(m.term for m in live)
        names = {m.leader for m in live if m.term == term and m.leader}
        leader = next(iter(names)) if len(names) == 1 else ""
        return self.members.get(leader) if leader else None

    def member_for(self, endpoint: str) -> MemberRow | None:
        return next((m for m in self.members.rows.values() if m.endpoint == endpoint), None)

    def trouble(self) -> str:
        """The banner's text: "" while the member served has quorum and is read-write."""
        me = self.member_for(self.serving)
        live = [m for m in self.members.rows.values() if m.reachable]
        if self.members.rows and not live:
            return "NO MEMBER REACHABLE — showing the last state seen"
        if me is not None and me.reachable:
            mode = self.serving_mode or me.mode
            if mode == "read-only":
                lost = f" (quorum lost {me.quorum_lost_ms / 1000:.1f}s ago)" \
                    if me.quorum_lost_ms else ""
                return f"READ-ONLY: {me.name} has no quorum{lost} — stale reads, no writes"
            if not me.has_quorum or mode == "no-quorum":
                return f"NO QUORUM: {me.name} cannot reach a majority — writes will fail"
        if live and not any(m.has_quorum for m in live):
            return "NO QUORUM: no reachable member has a majority — writes will fail"
        cut = sorted(m.name for m in live if not m.has_quorum and not m.learner)
        if cut:  # the console may be moved to one of them: say so whoever it talks to now
            return f"NO QUORUM on {', '.join(cut)}: cannot reach a majority"
        return ""

    def has_quorum(self) -> bool:
        """Writes can succeed as far as the console knows: some reachable member has a
        majority, and no banner says otherwise (the member served lost it)."""
        return not self.trouble() and any(
            m.reachable and m.has_quorum for m in self.members.rows.values())

    # -- what the console's user may not see ----------------------------------------------
    def refused(self, view: str, message: str) -> None:
        """The cluster refused what `view` shows (PERMISSION_DENIED, `message` naming the
        permission): told once, until it is served again."""
        if self.denied.get(view) != message:
            self.denied[view] = message
            self.denials += 1
            self.event("denied", f":{view}: {message}")

    def served(self, view: str) -> None:
        self.denied.pop(view, None)

    # -- events ---------------------------------------------------------------------------
    def event(self, kind: str, text: str) -> EventRow:
        self.events_seq += 1
        row = EventRow(self.events_seq, self.wall(), kind, text)
        self.events.appendleft(row)
        return row

    def owner_change(self, group: str, owner: Any, kind: str, snapshot: bool) -> None:
        """One entry of the ownership stream (coord.client.results.OwnerChange fields)."""
        key = (group, owner.resource)
        self.revision = max(self.revision, owner.revision)
        if owner.session_id:
            old = self.owners.get(key)
            seen = old.seen_at if old is not None and old.session_id == owner.session_id \
                and old.generation == owner.generation else self.wall()
            self.owners.put(key, OwnerRow(group, owner.resource, owner.session_id,
                                          owner.generation, owner.revision, seen))
        else:
            self.owners.remove(key)
        if not snapshot:
            who = f"session {owner.session_id}" if owner.session_id else "nobody"
            self.event(kind, f"{group}/{owner.resource} → {who} (generation "
                       f"{owner.generation}, revision {owner.revision})")

    def key_change(self, kind: str, kv: Any) -> None:
        self.revision = max(self.revision, kv.mod_revision)
        if kind == "DELETE":
            self.keys.remove(kv.key)
        else:
            self.keys.put(kv.key, KeyRow(kv.key, kv.value, kv.create_revision,
                                         kv.mod_revision, kv.version, kv.session_id))

    # -- sessions and producers (coord.client.admin_streams entries) ---------------------
    def _listing_of(self, name: str, snapshot: bool, key: Any) -> None:
        if snapshot:
            if name not in self._listing:
                self._listing[name] = set()
                self.loading.add(name)
            self._listing[name].add(key)

    def _listed_now(self, name: str) -> set:
        """The listing is complete: what it named (the caller drops the rest)."""
        self.loading.discard(name)
        self.served(name)
        named = self._listing.pop(name, set())
        self._listed.add(name)
        return named

    def session_change(self, c: Any) -> None:
        """One entry of the sessions stream (`SessionChange`)."""
        self.revision = max(self.revision, c.revision)
        if c.kind == "listed":
            named = self._listed_now("sessions")
            for sid in [k for k in self.sessions.rows if k not in named]:
                self._session_ended(sid, "ended while the console reconnected")
            return
        s = c.session
        self._listing_of("sessions", c.snapshot, s.id)
        if c.kind == "ended":
            self._session_ended(s.id, c.reason)
            return
        if s.id not in self.sessions.rows and "sessions" in self._listed:
            self.event("session", f"session {s.id} ({s.name}) opened")
        self.sessions.put(s.id, SessionRow(s.id, s.name, s.ttl_ms, s.read_only_ok,
                                           s.remaining_ms, self.mono(), s.owned, s.keys))

    def _session_ended(self, sid: int, why: str) -> None:
        row = self.sessions.get(sid)
        if row is not None:
            self.event("session", f"session {sid} ({row.name}) ended: {why or 'gone'}")
            self.sessions.remove(sid)

    def producer_change(self, c: Any) -> None:
        """One entry of the producers stream (`ProducerChange`)."""
        p = self.producers
        p.revision, p.next_pid, p.clock_ms = max(p.revision, c.revision), c.next_pid, c.clock_ms
        p.clock_seen = self.mono()
        self.revision = max(self.revision, c.revision)
        if c.kind == "listed":
            named = self._listed_now("producers")
            for kind, table in (("block", p.blocks), ("lease", p.leases),
                                ("producer", p.producers)):
                for key in [k for k in table.rows if (kind, k) not in named]:
                    table.remove(key)
            p.version += 1
            return
        table, key = {"block": (p.blocks, c.row[:2]), "lease": (p.leases, c.row[0]),
                      "producer": (p.producers, c.row[0])}[c.kind]
        self._listing_of("producers", c.snapshot, (c.kind, key))
        if c.removed:
            table.remove(key)
        else:
            if c.kind == "producer" and not c.snapshot:
                self.event("producer", f"producer {key}: pid {c.row[1]} epoch {c.row[2]}")
            table.put(key, tuple(c.row))
        p.version += 1
