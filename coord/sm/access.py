"""What each command needs of the user it is made as, and the first need that user lacks:
one permission model for both client APIs.

A need is a read or a write of a key or key range of one kind (`coord.sm.auth.KINDS`),
checked by `coord.sm.auth_checks.permitted` exactly as etcd checks a key. The etcd
commands' needs are etcd's (`auth_checks.key_checks`, kind "kv"); the native API's
commands add their typed resources:

  - an own or a release (which may sever another session, or reset a generation with a
    generation-0 claim) writes its ownership group, and the name of the session it acts
    for (so a grant on a group does not let a user own or release in another user's
    session's stead; a takeover is made in one's own session); get-owner, list-owners
    and an owner watch read the group;
  - InitProducer (and so every epoch bump) writes its transactional id; a PID block
    writes its requester and a PID lease its topic (kind "producer"); CheckProducer
    reads the transactional id;
  - opening a session writes its name; closing one writes the session's name (so
    revoking another's session needs a grant on its name), besides the keys attached to
    it, as an etcd lease revoke needs; an etcd lease revoke of an etcd lease (named
    `ETCD_LEASE_NAME`) needs the keys only, as etcd's. Using a session — its
    keepalives and its event stream — needs the same (`session_use`): the model records
    no opener, a session's name is what a user is granted, so "the session's own user"
    is whoever may write its name. A member-local session (opened on a read-only
    member, which proposes nothing) is checked by that member when opened and closed;
  - the administrative operations write `admin` keys (`ADMIN_OPS`): compaction through
    the native API and the PID capacity are commands and are checked here; membership
    and leader transfer change no state this machine holds and are checked by the member
    that takes them, after a read barrier;
  - the Admin service's inspection reads — ListSessions, ListProducers and the
    console's table streams (WatchOwnership, WatchSessions, WatchProducers) — read the
    `admin` key `inspect` (`INSPECTION`): each shows a whole table (every session with
    the groups and keys it holds, every producer), which no grant on single names
    covers, so it is one permission of its own. Member status (Status, WatchStatus)
    needs none, as etcd's Status;
  - the History service's export reads the `admin` key `history` (`HISTORY_EXPORT`):
    the committed history holds every command — keys, sessions, producers, users and
    their grants — so it is etcd's Snapshot in rows; the whole, for whoever is granted
    it (root always).

Writes are checked where they apply, so a permission revoked before a command commits
holds; reads by the member that serves them, after their read barrier. A command made as
no user ("" actor) is not checked here: while auth is on, a member refuses such a caller
anything with a need before proposing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from coord.sm import commands as c
from coord.sm.auth import ADMIN, GROUP, KV, PRODUCER, SESSION, AuthStore
from coord.sm.auth_checks import key_checks, permitted
from coord.sm.sessions import ETCD_LEASE_NAME, SessionTable

ADMIN_OPS = ("membership", "transfer", "compact", "pid-capacity")
INSPECT = "inspect"
"""The `admin` keys: add/remove members, transfer leadership, compact (native API), set
the PID capacity. Defragmenting (etcd's Maintenance service) needs the root role, as in
etcd, and so does a raw proposal of a command apply does not check."""


class Need(NamedTuple):
    kind: str
    key: bytes
    range_end: bytes
    write: bool

    def __str__(self) -> str:
        what = "WRITE" if self.write else "READ"
        if self.kind == KV:
            where = repr(self.key) + (f" to {self.range_end!r}" if self.range_end else "")
        else:
            where = repr(self.key.decode("utf-8", "replace"))
        return f"{what} on {self.kind} {where}"


def resource(kind: str, name: object, write: bool) -> Iterator[Need]:
    """The need of one named native resource (nothing for a name of the wrong type: the
    command is refused as invalid when it applies)."""
    if type(name) is str:
        yield Need(kind, name.encode("utf-8", "surrogatepass"), b"", write)


INSPECTION = Need(ADMIN, INSPECT.encode(), b"", False)
"""What the Admin service's inspection reads need (see the module doc)."""

HISTORY = "history"
HISTORY_EXPORT = Need(ADMIN, HISTORY.encode(), b"", False)
"""What a History export needs (see the module doc)."""


def session_use(name: str) -> Need:
    """What a session's keepalives and its event stream need: what opening it needed."""
    return next(resource(SESSION, name, True))


def named_session(sessions: SessionTable, session_id: int) -> Iterator[Need]:
    """The need of acting for session `session_id`: WRITE on its name (nothing for a
    session that is not there: the command is refused when it applies)."""
    session = sessions.get(session_id)
    if session is not None:
        yield from resource(SESSION, session.name, True)


def needs(cmd: object, sessions: SessionTable) -> Iterator[Need]:
    """Every access `cmd` needs (see the module doc)."""
    t = type(cmd)
    for key, end, write in key_checks(cmd, sessions):
        yield Need(KV, key, end, write)
    if t is c.Own or t is c.Release:
        yield from resource(GROUP, cmd.group, True)
        yield from named_session(sessions, cmd.session_id)
    elif t is c.GetOwner or t is c.ListOwners or t is c.OwnerEventsSince:
        yield from resource(GROUP, cmd.group, False)
    elif t is c.InitProducer:
        yield from resource(PRODUCER, cmd.producer_key, True)
    elif t is c.CheckProducer:
        yield from resource(PRODUCER, cmd.producer_key, False)
    elif t is c.AllocatePidBlock:
        yield from resource(PRODUCER, cmd.requester, True)
    elif t is c.LeasePid:
        yield from resource(PRODUCER, cmd.topic, True)
    elif t is c.OpenSession:
        yield from resource(SESSION, cmd.name, True)
    elif t is c.CloseSession:
        session = sessions.get(cmd.session_id)
        if session is not None and (cmd.native or session.name != ETCD_LEASE_NAME):
            yield from named_session(sessions, cmd.session_id)
    elif t is c.Compact and cmd.native:
        yield from resource(ADMIN, "compact", True)
    elif t is c.SetPidCapacity:
        yield from resource(ADMIN, "pid-capacity", True)
    elif t is c.EventsSince:
        yield Need(KV, cmd.key, cmd.range_end, False)


def holds(auth: AuthStore, user: str, need: Need) -> bool:
    """Whether `user` has `need` (always, while auth is off)."""
    return permitted(auth, user, need.key, need.range_end, need.write, need.kind)


def lacking(auth: AuthStore, sessions: SessionTable, user: str, cmd: object) -> Need | None:
    """The first access `cmd` needs that `user` lacks (None: none, or auth is off)."""
    if not auth.enabled:
        return None
    return next((n for n in needs(cmd, sessions) if not holds(auth, user, n)), None)


def denial_message(user: str, need: Need) -> str:
    """The message of a refusal for `need`: who, and the permission it lacked."""
    who = f"user {user!r:.60}" if user else "a caller without a user"
    return f"{who} lacks {need}"
