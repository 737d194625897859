"""Value types shared by commands, results, state and events.

Small records, never changed once made: KV entries and their watch events, ownership
grants and events, session events. Tuples of many items (claims, grants) are NamedTuples
so a 10,000-resource claim stays cheap to build and compact on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

PUT = "PUT"
DELETE = "DELETE"

RELEASED = "released"  # the session was closed by its client
EXPIRED = "expired"  # the leader saw its TTL run out
SEVERED = "severed"  # another session claimed one of its resources

# Why an ownership change happened (`OwnershipEvent.kind`), so a router replaying history
# can tell a graceful hand-off from a lost owner.
GRANT = "grant"  # claimed: free, or taken over at a higher generation (severing the owner)
RESET = "reset"  # claimed at generation 0: the generation restarts at 1
RELEASE = "release"  # released, or its session was closed
EXPIRE = "expire"  # its session's TTL ran out
SEVER = "sever"  # its session was severed by a claim on another of its resources
OWNERSHIP_KINDS = frozenset({GRANT, RESET, RELEASE, EXPIRE, SEVER})


class Claim(NamedTuple):
    """One (resource, generation) pair of an own request."""

    resource: str
    generation: int


class Grant(NamedTuple):
    """Ownership held after an own: `revision` is the revision the grant happened at."""

    resource: str
    generation: int
    revision: int


class Conflict(NamedTuple):
    """A resource held by another session at a higher generation than requested."""

    resource: str
    owner: int
    generation: int


class Owner(NamedTuple):
    resource: str
    session_id: int
    generation: int
    revision: int


@dataclass(frozen=True, slots=True)
class KeyValue:
    """A key's state: etcd's create/mod revisions and version (0 after delete)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    session_id: int = 0


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A KV change. For DELETE, `kv` holds the key, empty value and the delete revision."""

    type: str
    kv: KeyValue
    prev_kv: KeyValue | None
    revision: int


@dataclass(slots=True)
class OwnershipEvent:
    """A change of owner for (group, resource); owner 0 means it was freed. `kind` says
    why (GRANT, RESET, RELEASE, EXPIRE or SEVER); `generation` is the new owner's, or
    the freed resource's last.

    Never changed once made, like the other records, but not `frozen`: a frozen
    dataclass sets each field through `object.__setattr__`, and an own of 10,000
    resources builds 10,000 of these inside the apply (a fifth of its instructions)."""

    group: str
    resource: str
    owner: int
    generation: int
    revision: int
    kind: str


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """The end of a session and why. For `severed`: the group, the first resource
    claimed from it with its new generation, the new owner, and all such claims."""

    type: str
    session_id: int
    revision: int
    group: str = ""
    resource: str = ""
    generation: int = 0
    new_owner: int = 0
    claims: tuple[Claim, ...] = ()


Event = WatchEvent | OwnershipEvent | SessionEvent
