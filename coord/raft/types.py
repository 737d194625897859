"""The values the Raft core consumes and produces.

Plain, immutable-by-convention dataclasses: the core never does I/O, so everything it
needs arrives as one of these and everything it wants done leaves as one of these.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass, field
from enum import IntEnum

NONE = 0
"""Node id meaning "nobody" (no leader, no vote). Real node ids are never 0."""


class EntryType(IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1


class ConfChangeType(IntEnum):
    ADD_VOTER = 0
    REMOVE_NODE = 1
    ADD_LEARNER = 2


class Role(IntEnum):
    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


class MessageType(IntEnum):
    """Message kinds. Local ones (HUP, BEAT, PROP from the app, ...) never cross the wire."""

    HUP = 0  # local: start an election
    BEAT = 1  # local: leader sends heartbeats
    PROP = 2  # local: propose entries
    APP = 3
    APP_RESP = 4
    VOTE = 5
    VOTE_RESP = 6
    SNAP = 7
    HEARTBEAT = 8
    HEARTBEAT_RESP = 9
    UNREACHABLE = 10  # local: transport could not deliver to `frm`
    SNAP_STATUS = 11  # local: snapshot delivery outcome (reject=True means failed)
    CHECK_QUORUM = 12  # local
    TRANSFER_LEADER = 13  # local or forwarded to the leader
    TIMEOUT_NOW = 14
    READ_INDEX = 15
    READ_INDEX_RESP = 16
    PRE_VOTE = 17
    PRE_VOTE_RESP = 18


LOCAL_MESSAGES = frozenset(
    {
        MessageType.HUP,
        MessageType.BEAT,
        MessageType.PROP,
        MessageType.UNREACHABLE,
        MessageType.SNAP_STATUS,
        MessageType.CHECK_QUORUM,
    }
)


@dataclass(slots=True, frozen=True)
class Entry:
    term: int
    index: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""


@dataclass(slots=True, frozen=True)
class ConfState:
    voters: frozenset[int] = frozenset()
    learners: frozenset[int] = frozenset()

    @property
    def members(self) -> frozenset[int]:
        return self.voters | self.learners


@dataclass(slots=True, frozen=True)
class ConfChange:
    type: ConfChangeType
    node_id: int
    context: bytes = b""


@dataclass(slots=True, frozen=True)
class SnapshotMeta:
    index: int = 0
    term: int = 0
    conf_state: ConfState = field(default_factory=ConfState)


@dataclass(slots=True, frozen=True)
class Snapshot:
    """`data` is the application's, opaque to Raft, which only measures it (`len`): the
    snapshot's bytes (the in-memory test harness), or a small reference to where they
    are (a member's: the file, which its storage and transport read a piece at a time,
    so the core never holds a state's worth of bytes and never does I/O for them)."""

    meta: SnapshotMeta = field(default_factory=SnapshotMeta)
    data: Sized = b""

    @property
    def is_empty(self) -> bool:
        return self.meta.index == 0


@dataclass(slots=True, frozen=True)
class HardState:
    """What must be durable before any message that depends on it is sent."""

    term: int = 0
    vote: int = NONE
    commit: int = 0


@dataclass(slots=True)
class Message:
    type: MessageType
    to: int = NONE
    frm: int = NONE
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    snapshot: Snapshot | None = None
    reject: bool = False
    reject_hint: int = 0
    context: bytes = b""


@dataclass(slots=True, frozen=True)
class SoftState:
    """Volatile state worth reporting; not persisted."""

    leader: int
    role: Role
    has_quorum: bool


@dataclass(slots=True, frozen=True)
class ReadState:
    """A linearizable read may be served once the state machine has applied `index`."""

    index: int
    context: bytes


@dataclass(slots=True)
class Ready:
    """One batch of work for the driver, handled in this order:

    1. persist `snapshot` (if any), `entries` and `hard_state` (if any), durably when
       `must_sync` (a hard state that only moves the commit index need not be fsync'd);
    2. send `messages`;
    3. restore `snapshot` into the state machine, then apply `committed_entries`;
    4. call ``RawNode.advance(ready)``.

    The order is what lets a lone voter's `committed_entries` include this Ready's own
    `entries`: they are durable, and so committed, by step 3.
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    vote_changed: bool = False
    """`hard_state` has another term or vote than the last one handed out: a promise
    (a vote, a term seen) the messages rely on, so it is persisted before they go."""
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)

    @property
    def must_sync(self) -> bool:
        """etcd's MustSync: new entries, a snapshot, or a new term or vote. After a power
        loss the commit index alone is relearned from the leader."""
        return bool(self.entries) or self.snapshot is not None or self.vote_changed
