"""What the client returns: small frozen dataclasses, and their conversion from protobuf.

Callers get plain Python values (bytes, ints, tuples) that are hashable and safe to share
between threads, instead of mutable protobuf messages tied to the wire format. A
`header` says where and when an answer was made: the cluster revision, the serving
member, and whether that member was read-only (possibly stale) when it answered.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from coord.client.errors import error_for
from coord.v1 import coord_pb2 as pb

__all__ = [
    "CasResult",
    "Conflict",
    "DeleteResult",
    "Grant",
    "Header",
    "KeyValue",
    "OpResult",
    "OwnResult",
    "Owner",
    "OwnerChange",
    "OwnerRead",
    "PidBlock",
    "PidLease",
    "Producer",
    "PutResult",
    "RangeResult",
    "ReleaseResult",
    "SessionEvent",
    "SessionInfo",
    "TxnResult",
    "WatchEvent",
]


@dataclass(frozen=True, slots=True)
class Header:
    revision: int = 0
    raft_term: int = 0
    member: str = ""
    read_only: bool = False  # served by a member without quorum: possibly stale
    quorum_lost_ms: int = 0  # read_only: how long that member has been cut off


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    session_id: int = 0  # non-zero: deleted when that session ends


@dataclass(frozen=True, slots=True)
class PutResult:
    header: Header
    prev_kv: KeyValue | None = None


@dataclass(frozen=True, slots=True)
class RangeResult:
    header: Header
    kvs: tuple[KeyValue, ...] = ()
    count: int = 0
    more: bool = False


@dataclass(frozen=True, slots=True)
class DeleteResult:
    header: Header
    deleted: int = 0
    prev_kvs: tuple[KeyValue, ...] = ()


OpResult = PutResult | RangeResult | DeleteResult


@dataclass(frozen=True, slots=True)
class TxnResult:
    header: Header
    succeeded: bool
    responses: tuple[OpResult, ...] = ()


@dataclass(frozen=True, slots=True)
class CasResult:
    header: Header
    succeeded: bool
    kv: KeyValue | None = None  # the key as it is after the call


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # PUT | DELETE | MODE (the serving member changed mode; see `mode`)
    kv: KeyValue  # for DELETE: the key, an empty value and the delete revision
    prev_kv: KeyValue | None = None
    mode: str = ""  # MODE: read-only | read-write

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@dataclass(frozen=True, slots=True)
class SessionInfo:
    header: Header
    session_id: int
    ttl: float  # seconds
    local: bool = False  # member-local: held by the read-only member that opened it


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """Something that happened to a session. `type` is severed | released | expired |
    closed | mode_changed, or `gone`, which the client makes up when it learns the session
    ended without an event saying why (keepalive answered gone, the server no longer knows
    the id, or the event stream ended). A member-local session also hears `registered`
    (it is a cluster session now, same id) or `dropped` (it ended; `message` says why)."""

    type: str
    session_id: int
    revision: int = 0
    group: str = ""
    resource: str = ""
    generation: int = 0
    new_owner: int = 0
    resources: tuple[str, ...] = ()
    mode: str = ""
    member: str = ""
    term: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    resource: str
    generation: int
    revision: int


@dataclass(frozen=True, slots=True)
class Conflict:
    resource: str
    owner: int
    generation: int


@dataclass(frozen=True, slots=True)
class OwnResult:
    header: Header
    grants: tuple[Grant, ...] = ()
    severed: tuple[int, ...] = ()  # sessions this claim severed
    conflicts: tuple[Conflict, ...] = ()


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    header: Header
    released: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Owner:
    resource: str
    session_id: int  # 0: free
    generation: int
    revision: int

    @property
    def free(self) -> bool:
        return self.session_id == 0


@dataclass(frozen=True, slots=True)
class OwnerRead:
    """A resource's owner with the header of the read that found it: `header.revision`
    is the revision of coord's state the owner was read from, so a linearizable read
    shows that this was the owner at that revision (what an audit checks it against)."""

    header: Header
    owner: Owner


@dataclass(frozen=True, slots=True)
class OwnerChange:
    """One entry of a WatchOwners stream: a current owner from the initial listing
    (`snapshot`), or a change, with `kind` saying why: grant | reset | release | expire |
    sever (the last three free the resource: `owner.session_id` is 0), or `mode` when
    the serving member changed mode (`mode`: read-only | read-write; no owner)."""

    group: str
    owner: Owner
    snapshot: bool  # part of the initial listing, not a change
    kind: str = ""  # "" for listing entries
    mode: str = ""


@dataclass(frozen=True, slots=True)
class PidBlock:
    header: Header
    start: int
    size: int

    @property
    def pids(self) -> range:
        return range(self.start, self.start + self.size)


@dataclass(frozen=True, slots=True)
class PidLease:
    header: Header
    pid: int
    generation: int
    sequence_number: int
    expire_ms: int


@dataclass(frozen=True, slots=True)
class Producer:
    header: Header
    pid: int
    generation: int


# -- from protobuf ------------------------------------------------------------------------


def header(h: pb.ResponseHeader) -> Header:
    return Header(h.revision, h.raft_term, h.member, h.read_only, h.quorum_lost_ms)


def key_value(kv: pb.KeyValue) -> KeyValue:
    return KeyValue(
        kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.session_id
    )


def _opt_kv(msg: Message, name: str) -> KeyValue | None:
    return key_value(getattr(msg, name)) if msg.HasField(name) else None


def put_result(r: pb.PutResponse) -> PutResult:
    return PutResult(header(r.header), _opt_kv(r, "prev_kv"))


def range_result(r: pb.RangeResponse) -> RangeResult:
    return RangeResult(header(r.header), tuple(map(key_value, r.kvs)), r.count, r.more)


def delete_result(r: pb.DeleteRangeResponse) -> DeleteResult:
    return DeleteResult(header(r.header), r.deleted, tuple(map(key_value, r.prev_kvs)))


def first_kv(r: pb.RangeResponse) -> KeyValue | None:
    return key_value(r.kvs[0]) if r.kvs else None


def txn_result(r: pb.TxnResponse) -> TxnResult:
    out: list[OpResult] = []
    for op in r.responses:
        kind = op.WhichOneof("response")
        if kind == "put":
            out.append(put_result(op.put))
        elif kind == "range":
            out.append(range_result(op.range))
        elif kind == "delete_range":
            out.append(delete_result(op.delete_range))
    return TxnResult(header(r.header), r.succeeded, tuple(out))


def cas_result(r: pb.CasResponse) -> CasResult:
    return CasResult(header(r.header), r.succeeded, _opt_kv(r, "kv"))


def watch_event(e: pb.WatchEvent) -> WatchEvent:
    return WatchEvent(e.type, key_value(e.kv), _opt_kv(e, "prev_kv"))


def session_event(e: pb.SessionEvent) -> SessionEvent:
    return SessionEvent(
        e.type, e.session_id, e.revision, e.group, e.resource, e.generation, e.new_owner,
        tuple(e.resources), e.mode, e.member, e.term, e.reason,
    )


def owner(o: pb.Owner) -> Owner:
    return Owner(o.resource, o.session_id, o.generation, o.revision)


def owner_change(c: pb.OwnerChange) -> OwnerChange:
    if c.mode:
        return OwnerChange(c.group, owner(c.owner), False, "mode", c.mode)
    return OwnerChange(c.group, owner(c.owner), c.snapshot, c.kind)


def own_result(r: pb.OwnResponse) -> OwnResult:
    """The answer to an own sent with claim columns (`calls.own_call`): its grants come as
    columns too."""
    cols = r.grant_columns
    return OwnResult(
        header(r.header),
        tuple(map(Grant, cols.resources, cols.generations, cols.revisions)),
        tuple(r.severed),
        tuple(Conflict(c.resource, c.owner, c.generation) for c in r.conflicts),
    )


def lease_result(r: pb.LeasePidResponse) -> PidLease:
    if r.error:  # the specification reports lease failures in the body, not the status
        raise error_for(r.error, f"lease pid: {r.error}")
    return PidLease(header(r.header), r.pid, r.generation, r.sequence_number, r.expire_ms)
