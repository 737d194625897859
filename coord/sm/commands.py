"""The command vocabulary of the coordination state machine and its wire format.

A command is a frozen dataclass; on the wire it is `[version][tag]` followed by its
fields, packed or as canonical JSON (`coord.sm.framing`). Tags are stable forever: add new ones,
never renumber. Decoding is strict, so garbage is a ValueError, never a half-command.
Commands a client may retry carry `request_id` (empty: no deduplication). Time is not
part of a command: the leader's clock reading travels with every log entry and reaches
`apply` as `time_ms`. Commands made through a client API carry `actor`, the user the
call was made as ("" for none): apply checks that user's permissions while auth is on
(`coord.sm.access`), so a permission revoked before the command commits holds. A command
both APIs make and check differently says `native` when the native API made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coord.sm import framing
from coord.sm.auth_commands import (
    AuthCommand,
    AuthDisable,
    AuthEnable,
    Authenticate,
    RoleAdd,
    RoleDelete,
    RoleGrantPermission,
    RoleRevokePermission,
    UserAdd,
    UserChangePassword,
    UserDelete,
    UserGrantRole,
    UserRevokeRole,
)
from coord.sm.records import Claim
from coord.sm.results import decode_result, encode_result

__all__ = [
    "FORMAT_VERSION",
    "PACKED_VERSION",
    "Alarm",
    "AllocatePidBlock",
    "AuthCommand",
    "AuthDisable",
    "AuthEnable",
    "Authenticate",
    "Barrier",
    "CheckProducer",
    "Claim",
    "CloseSession",
    "Command",
    "Compact",
    "Compare",
    "DeleteRange",
    "EventsSince",
    "ExpireSessions",
    "GetOwner",
    "InitProducer",
    "LeasePid",
    "ListOwners",
    "NoteLeader",
    "NoteQuorumLost",
    "OpenSession",
    "Own",
    "OwnerEventsSince",
    "Put",
    "Range",
    "READ_COMMANDS",
    "Release",
    "RoleAdd",
    "RoleDelete",
    "RoleGrantPermission",
    "RoleRevokePermission",
    "SetPidCapacity",
    "Txn",
    "TxnOp",
    "UserAdd",
    "UserChangePassword",
    "UserDelete",
    "UserGrantRole",
    "UserRevokeRole",
    "command_tag",
    "decode_command",
    "decode_result",
    "encode_command",
    "encode_result",
]

FORMAT_VERSION = framing.JSON_VERSION
PACKED_VERSION = framing.PACKED_VERSION  # a command whose fields allow it (Put, Own, ...)

# -- KV ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Put:
    """ignore_value / ignore_lease (etcd's): keep the key's current value / session; the
    key must exist, and the value / session_id given must then be empty / 0. `actor`
    (see the module doc) counts on the command proposed, not on an op inside a txn."""

    key: bytes
    value: bytes
    session_id: int = 0  # non-zero: the key is deleted when that session ends
    prev_kv: bool = False
    request_id: str = ""
    ignore_value: bool = False
    ignore_lease: bool = False
    actor: str = ""


@dataclass(frozen=True)
class Range:
    """range_end: b"" = just `key`; b"\\0" = every key >= key; else [key, range_end)."""

    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0  # 0 = current


@dataclass(frozen=True)
class DeleteRange:
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False
    request_id: str = ""
    actor: str = ""


VALUE, VERSION, CREATE, MOD, LEASE = "VALUE", "VERSION", "CREATE", "MOD", "LEASE"
TARGETS = frozenset({VALUE, VERSION, CREATE, MOD, LEASE})  # LEASE: the key's session id
OPS = frozenset({"=", "!=", "<", ">"})


@dataclass(frozen=True)
class Compare:
    """etcd compare: `target` of `key` against `value` (VALUE) or `number` (others). With
    a `range_end` (etcd's conventions, "\\0": every key from `key` on), true iff it holds
    for every key in the range; for an empty range, as for a missing key."""

    key: bytes
    target: str
    op: str
    value: bytes = b""
    number: int = 0
    range_end: bytes = b""

    @classmethod
    def of_value(cls, key: bytes, op: str, value: bytes) -> Compare:
        return cls(key, VALUE, op, value=value)

    @classmethod
    def of_version(cls, key: bytes, op: str, version: int) -> Compare:
        return cls(key, VERSION, op, number=version)

    @classmethod
    def of_create(cls, key: bytes, op: str, revision: int) -> Compare:
        return cls(key, CREATE, op, number=revision)

    @classmethod
    def of_mod(cls, key: bytes, op: str, revision: int) -> Compare:
        return cls(key, MOD, op, number=revision)


@dataclass(frozen=True)
class Txn:
    """etcd's txn: every compare true runs `success`, else `failure`. Ops may be nested
    txns, whose compares are judged, like all of them, against the state before the txn
    (etcd's rule); a nested txn's request_id is ignored."""

    compares: tuple[Compare, ...] = ()
    success: tuple[TxnOp, ...] = ()
    failure: tuple[TxnOp, ...] = ()
    request_id: str = ""
    actor: str = ""

    @classmethod
    def put_if_absent(cls, key: bytes, value: bytes, request_id: str = "") -> Txn:
        """Create `key` only if it does not exist; on failure, read the current value."""
        return cls((Compare.of_create(key, "=", 0),), (Put(key, value),), (Range(key),),
                   request_id)

    @classmethod
    def compare_and_set(
        cls, key: bytes, expected_version: int, value: bytes, request_id: str = ""
    ) -> Txn:
        """The linearizable register of the KV-on-a-log specification: write iff the key is at
        `expected_version` (0 = absent); on failure, read the current value."""
        return cls((Compare.of_version(key, "=", expected_version),), (Put(key, value),),
                   (Range(key),), request_id)


TxnOp = Put | Range | DeleteRange | Txn


@dataclass(frozen=True)
class Compact:
    revision: int
    request_id: str = ""
    actor: str = ""  # who asked (etcd checks no permission to compact; the native API does)
    native: bool = False


@dataclass(frozen=True)
class EventsSince:
    """KV changes at revisions >= `revision` in the range: a watch starting in the past."""

    revision: int
    key: bytes
    range_end: bytes = b""


# -- sessions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenSession:
    """session_id 0: the machine allocates one; else that id is asked for (an etcd lease
    id chosen by its client), refused with SESSION_EXISTS while a live session has it."""

    name: str
    ttl_ms: int
    read_only_ok: bool = False
    request_id: str = ""
    session_id: int = 0
    actor: str = ""  # made through the native API (an etcd lease grant needs no permission)


@dataclass(frozen=True)
class CloseSession:
    session_id: int
    request_id: str = ""
    actor: str = ""  # it must write every key attached (and, `native`, the session's name)
    native: bool = False


@dataclass(frozen=True)
class ExpireSessions:
    """Proposed by the leader when sessions' TTLs run out; unknown ids are ignored."""

    session_ids: tuple[int, ...]


# -- ownership ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Own:
    session_id: int
    group: str
    claims: tuple[Claim, ...]
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class Release:
    session_id: int
    group: str
    resources: tuple[str, ...]
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class GetOwner:
    group: str
    resource: str


@dataclass(frozen=True)
class ListOwners:
    group: str
    prefix: str = ""


@dataclass(frozen=True)
class OwnerEventsSince:
    """Ownership changes in `group` under `prefix` at revisions >= `revision`: a
    WatchOwners starting in the past."""

    revision: int
    group: str
    prefix: str = ""


# -- producer ids ------------------------------------------------------------------------


@dataclass(frozen=True)
class AllocatePidBlock:
    requester: str
    size: int
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class LeasePid:
    """pid -1: issue a new pid; `random_generation` is drawn by the leader, never by apply.
    pid > 0: look up that pid's live lease."""

    topic: str
    partition: int
    pid: int = -1
    random_generation: int = 0
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class SetPidCapacity:
    """How many live pid leases the cluster holds (the idempotent-producer specification's
    fixed-size circular buffer): committed like any change, so every member's ring has the
    same size and refuses the same lease. Refused below the leases live now."""

    capacity: int
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class InitProducer:
    producer_key: str
    request_id: str = ""
    actor: str = ""


@dataclass(frozen=True)
class CheckProducer:
    producer_key: str
    pid: int
    generation: int


@dataclass(frozen=True)
class Barrier:
    """A no-op that returns the revision: the KV-on-a-log specification's "append a
    marker, read once it is applied" linearizable read."""


# -- alarms ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alarm:
    """Raise ("activate") or lower ("deactivate") an alarm of a member (etcd's Alarm; kind
    "NOSPACE"): proposed by a member over its space quota, or by an operator."""

    action: str
    member_id: int
    kind: str = "NOSPACE"
    actor: str = ""  # who asked, for the history (etcd checks no permission for alarms)


# -- history notes ------------------------------------------------------------------------


@dataclass(frozen=True)
class NoteLeader:
    """A new leader names itself in the log: the raft log holds terms, not who led them,
    and an audit of the history needs both. The machine keeps the latest note (so a
    history read from a snapshot on still knows its leader); no revision moves."""

    member: str
    term: int = 0


@dataclass(frozen=True)
class NoteQuorumLost:
    """A member that regained its quorum records the period it was without one (its own
    clock, `since_ms` to `until_ms`; `mode` is what it served meanwhile: "read-only" or
    "no-quorum"), so an audit can check nothing expired then. Changes no state."""

    member: str
    since_ms: int
    until_ms: int
    mode: str = "read-only"


NOTE_MODES = frozenset({"read-only", "no-quorum"})

Command = (
    Put | Range | DeleteRange | Txn | Compact | EventsSince | OpenSession | CloseSession
    | ExpireSessions | Own | Release | GetOwner | ListOwners | OwnerEventsSince
    | AllocatePidBlock | LeasePid | InitProducer | CheckProducer | Barrier | Alarm
    | NoteLeader | NoteQuorumLost | SetPidCapacity | AuthEnable | AuthDisable | Authenticate
    | UserAdd | UserDelete | UserChangePassword | UserGrantRole | UserRevokeRole | RoleAdd
    | RoleDelete | RoleGrantPermission | RoleRevokePermission
)

_TAGS: dict[type, int] = {
    Put: 1,
    Range: 2,
    DeleteRange: 3,
    Txn: 4,
    Compact: 5,
    EventsSince: 6,
    OpenSession: 10,
    CloseSession: 11,
    ExpireSessions: 12,
    Own: 20,
    Release: 21,
    GetOwner: 22,
    ListOwners: 23,
    OwnerEventsSince: 24,
    AllocatePidBlock: 30,
    LeasePid: 31,
    InitProducer: 32,
    CheckProducer: 33,
    SetPidCapacity: 34,
    Barrier: 40,
    Alarm: 41,
    AuthEnable: 50,
    AuthDisable: 51,
    Authenticate: 52,
    UserAdd: 53,
    UserDelete: 54,
    UserChangePassword: 55,
    UserGrantRole: 56,
    UserRevokeRole: 57,
    RoleAdd: 58,
    RoleDelete: 59,
    RoleGrantPermission: 60,
    RoleRevokePermission: 61,
    NoteLeader: 70,
    NoteQuorumLost: 71,
}
_BY_TAG: dict[int, type] = {tag: cls for cls, tag in _TAGS.items()}

READ_COMMANDS: frozenset[type] = frozenset(
    {Range, EventsSince, GetOwner, ListOwners, OwnerEventsSince, CheckProducer, Barrier}
)


def command_tag(cmd: Any) -> int:
    try:
        return _TAGS[type(cmd)]
    except KeyError:
        raise ValueError(f"not a command: {type(cmd).__name__}") from None


def encode_command(cmd: Command) -> bytes:
    """Deterministic bytes for `cmd` (ValueError if a field has the wrong type)."""
    return framing.encode(command_tag(cmd), cmd)


def decode_command(data: bytes) -> Command:
    """The command `data` encodes; ValueError for anything else."""
    return framing.decode(data, _BY_TAG, "command")
