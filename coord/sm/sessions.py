"""Sessions: the unit of liveness that ownership and ephemeral keys hang off.

A session is opened with a TTL; the leader tracks keepalives (not replicated, like etcd
lease renewals) and proposes `expire` for sessions whose TTL ran out, and a new leader
starts every session's clock afresh. Each session knows what it holds (owned resources,
session-bound keys), so closing, expiring or severing it releases everything in the
same command and revision, then emits one event naming why it ended.

As etcd's leases, opening a session is not a change at a revision, and ending one is
only if it released something (keys deleted, resources freed): the revision then moves
once for the whole command, else the end event carries the current revision. A sever
always takes something (the claim), so it moves with the claim. Ids come from a
replicated counter that never hands out an id twice (it skips ids in use); an opener may
instead ask for a specific id — an etcd client choosing its lease id — which it gets
unless a live session has it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coord.sm import limits
from coord.sm.canonical_json import INT64_MAX, Lazy
from coord.sm.errors import (
    INVALID_ARGUMENT,
    LIMIT_EXCEEDED,
    SESSION_EXISTS,
    TOO_LARGE,
    UNKNOWN_SESSION,
    CommandError,
)
from coord.sm.ledger import Ledger, operation
from coord.sm.records import EXPIRED, RELEASED, SEVERED, Claim, SessionEvent
from coord.sm.results import ExpireResult, SessionResult

ETCD_LEASE_NAME = "etcd-lease"
"""The name of every session opened as an etcd lease. The etcd API reaches any session
by its id; on one of another name (a native session) its revoke and keepalive need what
the native API's do, the name's WRITE (`coord.sm.access`), not only the keys'."""

LOCAL_SESSION_IDS = range(1 << 62, 1 << 63)
"""Ids of member-local read-only sessions (server/requests/local_sessions.py): drawn at random
by a read-only member, never by this table. The counter below counts up from 1 and never
gets here; the etcd API refuses to ask for an id here; so the only way one enters the
table is a local session's registration (an OpenSession asking for its id), and two
sessions never share an id (a taken one is refused with SESSION_EXISTS)."""


def is_local_session_id(session_id: int) -> bool:
    return session_id in LOCAL_SESSION_IDS


@dataclass
class Session:
    id: int
    name: str
    ttl_ms: int
    read_only_ok: bool  # may keep working while the cluster is read-only
    opened_ms: int
    owned: set[tuple[str, str]] = field(default_factory=set)  # (group, resource)
    keys: set[bytes] = field(default_factory=set)


# Called with (session, the event ending it) when a session ends, to release what it
# holds at the event's revision (the event's type says why, for those who record it).
Releaser = Callable[[Session, SessionEvent], None]
# Called with a session just opened: the leader's expiry clock starts it without
# scanning every session (it must not read clocks or do I/O: it runs inside apply).
Opener = Callable[[Session], None]


class SessionTable:
    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = Ledger() if ledger is None else ledger
        self.next_id = 1
        self._sessions: dict[int, Session] = {}
        self._releasers: list[Releaser] = []
        self._openers: list[Opener] = []

    def add_releaser(self, releaser: Releaser) -> None:
        self._releasers.append(releaser)

    def add_opener(self, opener: Opener) -> None:
        self._openers.append(opener)

    def remove_opener(self, opener: Opener) -> None:
        """Stop telling `opener` (a machine adopting this table reports to itself)."""
        self._openers.remove(opener)

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: int) -> Session | None:
        return self._sessions.get(session_id)

    def ids(self) -> list[int]:
        return sorted(self._sessions)

    def all(self) -> list[Session]:
        """Every live session, in no particular order (cheaper than `ids` + `get`)."""
        return list(self._sessions.values())

    def require(self, session_id: Any) -> Session:
        """The live session `session_id`, or a refusal."""
        if type(session_id) is not int or session_id <= 0:
            raise CommandError(INVALID_ARGUMENT, f"session id must be a positive int, got "
                               f"{session_id!r:.40}")
        session = self._sessions.get(session_id)
        if session is None:
            raise CommandError(UNKNOWN_SESSION, f"session {session_id} does not exist "
                               "(never opened, closed, expired or severed)")
        return session

    @operation(SessionResult)
    def open(
        self, name: str, ttl_ms: int, read_only_ok: bool, now_ms: int, session_id: int = 0
    ) -> SessionResult:
        check_open(name, ttl_ms, read_only_ok, session_id)
        if session_id in self._sessions:
            raise CommandError(SESSION_EXISTS, f"session {session_id} already exists")
        if len(self._sessions) >= limits.MAX_SESSIONS:
            raise CommandError(LIMIT_EXCEEDED, f"{len(self._sessions)} sessions are open, the "
                               f"limit is {limits.MAX_SESSIONS}: close unused ones first")
        self.ledger.mark()  # a change of state, but not of the revision (etcd's LeaseGrant)
        if session_id == 0:
            while self.next_id in self._sessions:  # taken by an asked-for id
                self.next_id += 1
            session_id = self.next_id
            self.next_id += 1
        session = Session(session_id, name, ttl_ms, read_only_ok, now_ms)
        self._sessions[session.id] = session
        for opener in self._openers:
            opener(session)
        return SessionResult(revision=self.ledger.head, session_id=session.id, ttl_ms=ttl_ms)

    @operation(SessionResult)
    def close(self, session_id: int) -> SessionResult:
        session = self.require(session_id)
        revision = self._ending_revision([session])
        self._end(session, SessionEvent(RELEASED, session.id, revision))
        return SessionResult(revision=revision, session_id=session.id, ttl_ms=session.ttl_ms)

    @operation(ExpireResult)
    def expire(self, session_ids: Iterable[int]) -> ExpireResult:
        ids = list(session_ids) if isinstance(session_ids, (list, tuple)) else None
        if ids is None or any(type(i) is not int for i in ids):
            raise CommandError(INVALID_ARGUMENT, "session_ids must be a sequence of ints")
        if len(ids) > limits.MAX_EXPIRE_IDS:
            raise CommandError(TOO_LARGE, f"more than {limits.MAX_EXPIRE_IDS} ids")
        # first occurrence order, no repeats
        ending = [s for i in dict.fromkeys(ids) if (s := self._sessions.get(i)) is not None]
        if not ending:
            return ExpireResult(revision=self.ledger.head)
        revision = self._ending_revision(ending)  # one for all: they end in one command
        for session in ending:
            self._end(session, SessionEvent(EXPIRED, session.id, revision))
        return ExpireResult(revision=revision, expired=tuple(s.id for s in ending))

    def sever(self, session_id: int, group: str, claims: list[Claim], new_owner: int) -> None:
        """End a session because `new_owner` claimed `claims` (resource, new generation)
        from it in `group`. Called inside the claiming command, which moves the revision
        (taking a resource is a change), so the sever shares that one revision."""
        session = self._sessions[session_id]
        first = claims[0]
        self._end(session, SessionEvent(
            SEVERED, session_id, self.ledger.touch(), group=group, resource=first.resource,
            generation=first.generation, new_owner=new_owner, claims=tuple(claims)))

    def _ending_revision(self, sessions: list[Session]) -> int:
        """The revision ending `sessions` happens at: the next one if any of them holds
        something whose release is a change, else the current one (etcd's LeaseRevoke of a
        lease without keys leaves the revision where it is)."""
        if any(s.keys or s.owned for s in sessions):
            return self.ledger.touch()
        self.ledger.mark()  # the sessions go (a change of state), the revision stays
        return self.ledger.head

    def _end(self, session: Session, event: SessionEvent) -> None:
        for release in self._releasers:
            release(session, event)
        self.ledger.emit(event)
        del self._sessions[session.id]

    # -- snapshot ------------------------------------------------------------------------

    def capture(self) -> dict:
        """This table now, cheaply: the sessions in id order, each made a row only when
        `canonical_json.iter_dumps` reaches it. A session's row fields never change once it is
        open, so holding the records is holding their state (at 100k sessions building
        every row here took 170 ms of the loop, and a leader's heartbeats stalled)."""
        sessions = self._sessions
        return {"next_id": self.next_id,
                "sessions": Lazy([sessions[i] for i in sorted(sessions)], _session_row)}

    def load_state(self, state: dict) -> None:
        """Holdings are rebuilt by the modules that own them (see their load_state)."""
        self.next_id = _int(state["next_id"])
        self._sessions = {}
        for sid, name, ttl_ms, read_only_ok, opened_ms in state["sessions"]:
            if type(name) is not str or type(read_only_ok) is not bool:
                raise ValueError("bad session record")
            if _int(sid) in self._sessions or sid <= 0:  # asked-for ids may pass next_id
                raise ValueError(f"bad session id {sid!r}")
            self._sessions[sid] = Session(sid, name, _int(ttl_ms), read_only_ok, _int(opened_ms))

    def describe(self) -> dict:
        return {"sessions": len(self._sessions), "next_session_id": self.next_id}


def _session_row(s: Session) -> list[Any]:
    return [s.id, s.name, s.ttl_ms, s.read_only_ok, s.opened_ms]


def check_open(name: Any, ttl_ms: Any, read_only_ok: Any, session_id: Any = 0) -> None:
    """Refuse (CommandError) what no session may be opened with: the rule every member
    applies, and a read-only member before it opens a member-local session."""
    if type(name) is not str:
        raise CommandError(INVALID_ARGUMENT, "session name must be a str")
    if limits.utf8_len(name) > limits.MAX_NAME_BYTES:
        raise CommandError(TOO_LARGE, f"session name longer than {limits.MAX_NAME_BYTES}"
                           " bytes")
    if type(ttl_ms) is not int or not limits.MIN_TTL_MS <= ttl_ms <= limits.MAX_TTL_MS:
        raise CommandError(INVALID_ARGUMENT, f"ttl_ms must be within "
                           f"[{limits.MIN_TTL_MS}, {limits.MAX_TTL_MS}], got {ttl_ms!r:.40}")
    if type(read_only_ok) is not bool:
        raise CommandError(INVALID_ARGUMENT, "read_only_ok must be a bool")
    if type(session_id) is not int or not 0 <= session_id <= INT64_MAX:
        raise CommandError(INVALID_ARGUMENT, f"session id must be a non-negative int64, "
                           f"got {session_id!r:.40}")


def _int(v: Any) -> int:
    if type(v) is not int:
        raise ValueError(f"expected an int, got {v!r:.40}")
    return v
