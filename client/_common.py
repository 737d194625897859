"""Everything the sync and asyncio clients share that is not I/O.

Request building (one `Call` per API method, carrying a fresh request_id for every write
that supports one), response conversion to small frozen dataclasses, the failover and
retry policy, watch-resume bookkeeping and session liveness bookkeeping all live here,
so `sync.py` and `aio.py` differ only in how they wait.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar

import grpc
from google.protobuf.message import Message

from coord.client.errors import (
    CompactedError,
    CoordError,
    DeadlineError,
    UnavailableError,
    error_for,
)
from coord.v1 import admin_pb2, admin_pb2_grpc
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as pb_grpc

log = logging.getLogger("coord.client")

T = TypeVar("T")

# -- endpoints and retry policy -----------------------------------------------------------

DEFAULT_ENDPOINTS: tuple[str, ...] = ("127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103")
"""Where `coord dev` listens by default."""
ENDPOINTS_ENV = "COORD_ENDPOINTS"

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    # gRPC's own reconnect backoff defaults to 1 s .. 120 s: a member that was down would
    # stay unreachable long after it is back. Keep it within our own backoff.
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Ranges and txns may carry many 1 MiB values (the default limit is 4 MiB).
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
]


def parse_endpoints(endpoints: Sequence[str] | str | None = None) -> list[str]:
    """A de-duplicated endpoint list from a list or a comma-separated string; None means
    $COORD_ENDPOINTS, else the `coord dev` defaults."""
    if endpoints is None:
        endpoints = os.environ.get(ENDPOINTS_ENV) or ",".join(DEFAULT_ENDPOINTS)
    items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    if not out:
        raise ValueError("no endpoints given")
    return out


class EndpointRing:
    """The current endpoint, shared by every call, stream and keepalive of one client so
    that a member found down is skipped by all of them. `failed(i)` moves on only if `i`
    is still current: concurrent failures against one member rotate once, not N times."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        if not endpoints:
            raise ValueError("no endpoints given")
        self.endpoints: tuple[str, ...] = tuple(endpoints)
        self._index = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.endpoints)

    def current(self) -> tuple[int, str]:
        with self._lock:
            return self._index, self.endpoints[self._index]

    def failed(self, index: int) -> None:
        with self._lock:
            if index == self._index:
                self._index = (index + 1) % len(self.endpoints)

    def move_to(self, index: int) -> bool:
        """Make `index` current (the prober found a read-write member); True if it moved."""
        with self._lock:
            moved, self._index = self._index != index, index
            return moved


READ_ONLY_OK_METADATA: tuple[tuple[str, str], ...] = (("coord-read-only-ok", "1"),)
"""Sent with every call of a client that accepts read-only service (ZooKeeper's
"am-i-readonly-client" flag); sessions also carry it from OpenSession."""


NOT_APPLIED_REASONS: frozenset[str] = frozenset(
    {"NO_LEADER", "NO_QUORUM", "READ_ONLY", "NOT_LEADER", "PROPOSAL_LOST", "NOT_CONNECTED"}
)
"""Reasons that prove the request was not applied, so even a write without a request_id
may be sent again. (NOT_CONNECTED is the client's own: the channel never became ready.)"""


def may_fail_over(err: CoordError, safe: bool) -> bool:
    """Whether a failed request may be repeated on the next member: always when the error
    proves it was not applied; on any transient failure (unavailable, deadline) only when
    repeating is harmless — a read, or a write carrying a request_id. A read-only member
    refusing a write is the caller's to know at once (ReadOnlyError): the client's
    prober, not the write, goes looking for a read-write member."""
    if err.reason == "READ_ONLY":
        return False
    if err.reason in NOT_APPLIED_REASONS:
        return True
    return safe and (err.retryable or isinstance(err, DeadlineError))


def stream_may_resume(err: CoordError) -> bool:
    """Whether a server stream that failed may be reopened (on the next member). Streams
    are reads, so any transient failure qualifies, including a cancellation we did not ask
    for (a member shutting down cancels its streams)."""
    return may_fail_over(err, True) or err.code == grpc.StatusCode.CANCELLED


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded failover: at most `rounds` passes over the endpoints (and `min_attempts`
    tries), with a short jittered pause that doubles after each full pass, and never
    longer than `budget_factor` x the per-call timeout in total."""

    rounds: int = 2
    min_attempts: int = 3
    backoff: float = 0.05
    max_backoff: float = 1.0
    budget_factor: float = 3.0

    def attempts(self, endpoints: int) -> int:
        return max(self.min_attempts, self.rounds * max(1, endpoints))

    def delay(self, failures: int, endpoints: int) -> float:
        """Pause before try `failures + 1`: short between members, longer per pass."""
        passes = max(0, failures - 1) // max(1, endpoints)
        base = min(self.max_backoff, self.backoff * (2**passes))
        return base * (0.5 + random.random() / 2)


WAIT_REASONS: frozenset[str] = frozenset({"NO_LEADER", "NO_QUORUM"})
ELECTION_PATIENCE = 4  # x the usual number of tries, still within the time budget


class Attempts:
    """One operation's retry budget."""

    def __init__(
        self,
        policy: RetryPolicy,
        endpoints: int,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.endpoints = endpoints
        self.timeout = timeout
        self.failures = 0
        self._clock = clock
        self._max = policy.attempts(endpoints)
        self._deadline = clock() + timeout * policy.budget_factor
        self._no_quorum: CoordError | None = None
        self._electing = False

    def call_timeout(self) -> float:
        """The deadline for the next try: the per-call timeout, cut to what is left."""
        return max(0.001, min(self.timeout, self._deadline - self._clock()))

    def final(self, err: CoordError) -> CoordError:
        """The error to raise on giving up: NoQuorumError if a member said it has no quorum
        and no other member did better (the rest unreachable or stuck)."""
        if self._no_quorum is not None and isinstance(err, (UnavailableError, DeadlineError)):
            if err.reason != "NO_QUORUM":
                return error_for(
                    "NO_QUORUM",
                    f"no member with a quorum reachable ({self._no_quorum.message}; "
                    f"last: {err.message})",
                    grpc.StatusCode.UNAVAILABLE,
                )
        return err

    def next_delay(self, err: CoordError, safe: bool) -> float | None:
        """Seconds to wait before trying the next member, or None: give up and raise."""
        if err.reason == "NO_QUORUM":
            self._no_quorum = err
        self._electing = self._electing or err.reason in WAIT_REASONS
        if not may_fail_over(err, safe):
            return None
        self.failures += 1
        # Once a member said it has no leader or quorum, an election may be under way (a
        # leader died, and is refusing connections): ride it out for the whole time
        # budget, with the pauses growing per pass.
        limit = self._max * ELECTION_PATIENCE if self._electing else self._max
        if self.failures >= limit:
            return None
        delay = self.policy.delay(self.failures, self.endpoints)
        if self._clock() + delay >= self._deadline:
            return None
        return delay


def new_request_id() -> str:
    """A fresh id for one logical write; its retries reuse it, so the server applies the
    write at most once even if a reply was lost."""
    return uuid.uuid4().hex


# -- keys ---------------------------------------------------------------------------------

Bytesish = bytes | bytearray | memoryview | str


def to_bytes(v: Bytesish) -> bytes:
    """Keys and values are bytes on the wire; str is encoded as UTF-8."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"expected bytes or str, got {type(v).__name__}")


def prefix_end(prefix: bytes) -> bytes:
    """The range end covering every key that starts with `prefix` (etcd's rule): the
    prefix with its last byte below 0xff incremented; b"\\0" (no end) if there is none."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


def key_range(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    prefix: Bytesish | None = None,
) -> tuple[bytes, bytes]:
    """(key, range_end) for one key, [key, range_end), or every key under `prefix`
    (prefix "" means every key). The end is computed here, not by the server, so a
    resumed watch covers exactly the same keys."""
    if prefix is not None:
        if key is not None or range_end is not None:
            raise ValueError("give either prefix or key/range_end, not both")
        p = to_bytes(prefix)
        return (p, prefix_end(p)) if p else (b"\0", b"\0")
    if key is None:
        raise ValueError("a key or a prefix is required")
    return to_bytes(key), to_bytes(range_end) if range_end is not None else b""


class HasSessionId(Protocol):
    @property
    def id(self) -> int: ...


SessionRef = int | HasSessionId


def session_id_of(session: SessionRef | None) -> int:
    """Accept a Session object or a bare id (None: no session, 0)."""
    if session is None:
        return 0
    if isinstance(session, int) and not isinstance(session, bool):
        return session
    sid = getattr(session, "id", None)
    if isinstance(sid, int):
        return sid
    raise TypeError(f"expected a session or a session id, got {type(session).__name__}")


# -- results ------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """Something that happened to a session. `type` is severed | released | expired |
    closed | mode_changed, or `gone`, which the client makes up when it learns the session
    ended without an event saying why (keepalive answered gone, the server no longer knows
    the id, or the event stream ended)."""

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
        tuple(e.resources), e.mode, e.member, e.term,
    )


def owner(o: pb.Owner) -> Owner:
    return Owner(o.resource, o.session_id, o.generation, o.revision)


def owner_change(c: pb.OwnerChange) -> OwnerChange:
    if c.mode:
        return OwnerChange(c.group, owner(c.owner), False, "mode", c.mode)
    return OwnerChange(c.group, owner(c.owner), c.snapshot, c.kind)


def own_result(r: pb.OwnResponse) -> OwnResult:
    return OwnResult(
        header(r.header),
        tuple(Grant(g.resource, g.generation, g.revision) for g in r.grants),
        tuple(r.severed),
        tuple(Conflict(c.resource, c.owner, c.generation) for c in r.conflicts),
    )


def lease_result(r: pb.LeasePidResponse) -> PidLease:
    if r.error:  # the seed reports lease failures in the body, not the status
        raise error_for(r.error, f"lease pid: {r.error}")
    return PidLease(header(r.header), r.pid, r.generation, r.sequence_number, r.expire_ms)


# -- calls --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call(Generic[T]):
    """One unary request and what the client needs to send it: `safe` says repeating it
    after an ambiguous failure is harmless (a read, or a write with a request_id);
    `linearizable` marks reads that must not be answered from a read-only member."""

    service: str  # Sessions | Ownership | Producers | KV
    method: str
    request: Message
    convert: Callable[[Any], T]
    safe: bool
    linearizable: bool = False


class Stubs:
    """The service stubs on one channel (sync or grpc.aio alike)."""

    def __init__(self, channel: grpc.Channel | grpc.aio.Channel) -> None:
        self.Sessions = pb_grpc.SessionsStub(channel)
        self.Ownership = pb_grpc.OwnershipStub(channel)
        self.Producers = pb_grpc.ProducersStub(channel)
        self.KV = pb_grpc.KVStub(channel)
        self.Admin = admin_pb2_grpc.AdminStub(channel)

    def method(self, service: str, method: str) -> Any:
        return getattr(getattr(self, service), method)


def finish(call: Call[T], response: Any, read_only_ok: bool) -> T:
    """Convert a response; a linearizable read answered from a read-only member is an
    error unless the client accepts read-only service (it fails over to another member)."""
    if call.linearizable and not read_only_ok and response.header.read_only:
        raise error_for(
            "NO_QUORUM", f"member {response.header.member or '?'} has no quorum (stale read)",
            grpc.StatusCode.UNAVAILABLE,
        )
    return call.convert(response)


def served_read_only(response: Any) -> bool:
    """Whether a response came from a read-only member (it carries a header saying so)."""
    header = getattr(response, "header", None)
    return bool(header is not None and header.read_only)


# -- moving off a read-only member --------------------------------------------------------

PROBE_FIRST_PAUSE = 0.1
PROBE_MAX_PAUSE = 2.0  # ZooKeeper's client backs off to 60 s; a few seconds is enough
PROBE_TIMEOUT = 0.5
READ_WRITE = "read-write"
STATUS_REQUEST = admin_pb2.StatusRequest()


@dataclass(frozen=True, slots=True)
class ModeChange:
    """The client moved to (or found again) a read-write member."""

    mode: str
    member: str
    endpoint: str
    moved: bool = False  # the client switched members (streams must follow)


def move_to_read_write(
    ring: EndpointRing,
    listeners: Iterable[Callable[[ModeChange], Any]],
    index: int,
    member: str,
) -> None:
    """The prober found read-write `member` at ring `index`: make it current and tell
    the mode listeners (sync and asyncio clients alike)."""
    endpoint = ring.endpoints[index]
    moved = ring.move_to(index)
    if moved:
        log.info("coord: moved to read-write member %s (%s)", member, endpoint)
    change = ModeChange(READ_WRITE, member, endpoint, moved)
    for listener in list(listeners):
        try:
            listener(change)
        except Exception:  # a listener's bug must not stop the others
            log.exception("coord: mode listener failed")


def probe_pause(round_: int) -> float:
    return min(PROBE_MAX_PAUSE, PROBE_FIRST_PAUSE * 2**min(round_, 16))


def probe_order(ring: EndpointRing) -> list[int]:
    """The current member first (it may be back already), then the others in ring order."""
    index, _ = ring.current()
    n = len(ring)
    return [(index + k) % n for k in range(n)]


def is_read_write(status: admin_pb2.StatusResponse) -> bool:
    return status.mode == READ_WRITE if status.mode else status.has_quorum


def _ident(x: Any) -> Any:
    return x


def put_call(
    key: Bytesish, value: Bytesish, *, session: SessionRef | None = None, prev_kv: bool = False
) -> Call[PutResult]:
    req = pb.PutRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=session_id_of(session),
        prev_kv=prev_kv, request_id=new_request_id(),
    )
    return Call("KV", "Put", req, put_result, safe=True)


def range_request(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    *,
    prefix: Bytesish | None = None,
    limit: int = 0,
    revision: int = 0,
    serializable: bool = False,
) -> pb.RangeRequest:
    k, end = key_range(key, range_end, prefix)
    return pb.RangeRequest(
        key=k, range_end=end, limit=limit, revision=revision, serializable=serializable
    )


def range_call(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    *,
    prefix: Bytesish | None = None,
    limit: int = 0,
    revision: int = 0,
    serializable: bool = False,
) -> Call[RangeResult]:
    req = range_request(
        key, range_end, prefix=prefix, limit=limit, revision=revision, serializable=serializable
    )
    return Call("KV", "Range", req, range_result, safe=True, linearizable=not serializable)


def get_call(key: Bytesish, *, revision: int = 0, serializable: bool = False) -> Call[
    KeyValue | None
]:
    req = pb.RangeRequest(key=to_bytes(key), revision=revision, serializable=serializable)
    return Call("KV", "Range", req, first_kv, safe=True, linearizable=not serializable)


def delete_request(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    *,
    prefix: Bytesish | None = None,
    prev_kv: bool = False,
    request_id: str = "",
) -> pb.DeleteRangeRequest:
    k, end = key_range(key, range_end, prefix)
    return pb.DeleteRangeRequest(key=k, range_end=end, prev_kv=prev_kv, request_id=request_id)


def delete_call(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    *,
    prefix: Bytesish | None = None,
    prev_kv: bool = False,
) -> Call[DeleteResult]:
    req = delete_request(key, range_end, prefix=prefix, prev_kv=prev_kv,
                         request_id=new_request_id())
    return Call("KV", "DeleteRange", req, delete_result, safe=True)


def txn_call(request: pb.TxnRequest) -> Call[TxnResult]:
    if not request.request_id:
        raise ValueError("a txn request needs a request_id (TxnBuilder.build adds one)")
    return Call("KV", "Txn", request, txn_result, safe=True)


def put_if_absent_call(
    key: Bytesish, value: Bytesish, *, session: SessionRef | None = None
) -> Call[CasResult]:
    req = pb.PutIfAbsentRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=session_id_of(session),
        request_id=new_request_id(),
    )
    return Call("KV", "PutIfAbsent", req, cas_result, safe=True)


def compare_and_set_call(
    key: Bytesish, expected_version: int, value: Bytesish, *, session: SessionRef | None = None
) -> Call[CasResult]:
    req = pb.CompareAndSetRequest(
        key=to_bytes(key), expected_version=expected_version, value=to_bytes(value),
        session_id=session_id_of(session), request_id=new_request_id(),
    )
    return Call("KV", "CompareAndSet", req, cas_result, safe=True)


def compact_call(revision: int) -> Call[Header]:
    # No request_id in the API: repeating an applied compaction fails with COMPACTED, so
    # it is only repeated when the error proves it was not applied.
    req = pb.CompactRequest(revision=revision)
    return Call("KV", "Compact", req, lambda r: header(r.header), safe=False)


def open_session_call(name: str, ttl: float, read_only_ok: bool) -> Call[SessionInfo]:
    req = pb.OpenSessionRequest(
        name=name, ttl_ms=round(ttl * 1000), read_only_ok=read_only_ok,
        request_id=new_request_id(),
    )
    return Call(
        "Sessions", "OpenSession", req,
        lambda r: SessionInfo(header(r.header), r.session_id, r.ttl_ms / 1000), safe=True,
    )


def close_session_call(session: SessionRef) -> Call[Header]:
    # Safe to repeat: a repeat of an applied close answers UNKNOWN_SESSION, which the
    # callers treat as "closed".
    req = pb.CloseSessionRequest(session_id=session_id_of(session))
    return Call("Sessions", "CloseSession", req, lambda r: header(r.header), safe=True)


ClaimLike = str | tuple[str, int] | pb.Claim


BARE_CLAIM_GENERATION = 1


def claims_pb(claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> list[pb.Claim]:
    """Claims as resource names, (resource, generation) pairs, or a {resource: generation}
    mapping. A bare name claims at generation 1: it takes a free resource (at its last
    generation + 1) and severs only an owner still at generation 1; it never resets the
    generation the way an explicit 0 does, so generations stay usable as fencing tokens."""
    if isinstance(claims, str):
        claims = [claims]
    if isinstance(claims, Mapping):
        claims = list(claims.items())
    out: list[pb.Claim] = []
    for c in claims:
        if isinstance(c, pb.Claim):
            out.append(pb.Claim(resource=c.resource, generation=c.generation))
        elif isinstance(c, str):
            out.append(pb.Claim(resource=c, generation=BARE_CLAIM_GENERATION))
        else:
            resource, generation = c
            out.append(pb.Claim(resource=resource, generation=generation))
    return out


def own_call(
    session: SessionRef, group: str, claims: Iterable[ClaimLike] | Mapping[str, int] | str
) -> Call[OwnResult]:
    req = pb.OwnRequest(
        session_id=session_id_of(session), group=group, claims=claims_pb(claims),
        request_id=new_request_id(),
    )
    return Call("Ownership", "Own", req, own_result, safe=True)


def release_call(
    session: SessionRef, group: str, resources: Iterable[str] | str
) -> Call[ReleaseResult]:
    names = [resources] if isinstance(resources, str) else list(resources)
    req = pb.ReleaseRequest(
        session_id=session_id_of(session), group=group, resources=names,
        request_id=new_request_id(),
    )
    return Call(
        "Ownership", "Release", req,
        lambda r: ReleaseResult(header(r.header), tuple(r.released)), safe=True,
    )


def get_owner_call(group: str, resource: str, serializable: bool = False) -> Call[Owner]:
    req = pb.GetOwnerRequest(group=group, resource=resource, serializable=serializable)
    return Call("Ownership", "GetOwner", req, lambda r: owner(r.owner), safe=True,
                linearizable=not serializable)


def list_owners_call(
    group: str, prefix: str = "", serializable: bool = False
) -> Call[tuple[Owner, ...]]:
    req = pb.ListOwnersRequest(group=group, prefix=prefix, serializable=serializable)
    return Call("Ownership", "ListOwners", req, lambda r: tuple(map(owner, r.owners)),
                safe=True, linearizable=not serializable)


def allocate_pid_block_call(requester: str = "", size: int = 1000) -> Call[PidBlock]:
    req = pb.AllocatePidBlockRequest(requester=requester, size=size,
                                     request_id=new_request_id())
    return Call("Producers", "AllocatePidBlock", req,
                lambda r: PidBlock(header(r.header), r.start, r.size), safe=True)


def lease_pid_call(topic: str, partition: int, pid: int = -1) -> Call[PidLease]:
    req = pb.LeasePidRequest(topic=topic, partition=partition, pid=pid,
                             request_id=new_request_id())
    return Call("Producers", "LeasePid", req, lease_result, safe=True)


def init_producer_call(producer_key: str) -> Call[Producer]:
    req = pb.InitProducerRequest(producer_key=producer_key, request_id=new_request_id())
    return Call("Producers", "InitProducer", req,
                lambda r: Producer(header(r.header), r.pid, r.generation), safe=True)


def check_producer_call(producer_key: str, pid: int, generation: int) -> Call[Header]:
    req = pb.CheckProducerRequest(producer_key=producer_key, pid=pid, generation=generation)
    return Call("Producers", "CheckProducer", req, lambda r: header(r.header), safe=True,
                linearizable=True)


# -- txn builder --------------------------------------------------------------------------

_COMPARE_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", ">": ">"}
COMPARE_TARGETS = ("value", "version", "create", "mod")


class TxnBuilder:
    """Builds a TxnRequest: every `if_*` compare must hold for the `then_*` ops to run;
    otherwise the `else_*` ops run. The sync and async clients' `txn()` return subclasses
    with `commit()`."""

    def __init__(self) -> None:
        self._compares: list[pb.Compare] = []
        self._success: list[pb.RequestOp] = []
        self._failure: list[pb.RequestOp] = []

    # compares
    def compare(self, key: Bytesish, target: str, op: str, value: Bytesish | int) -> Self:
        """A compare of `target` (value | version | create | mod) of `key`."""
        if target not in COMPARE_TARGETS:
            raise ValueError(f"compare target must be one of {COMPARE_TARGETS}, got {target!r}")
        if op not in _COMPARE_OPS:
            raise ValueError(f"compare op must be one of = != < >, got {op!r}")
        cmp = pb.Compare(key=to_bytes(key), target=target, op=_COMPARE_OPS[op])
        if target == "value":
            if isinstance(value, int):
                raise TypeError("a value compare takes bytes or str")
            cmp.value = to_bytes(value)
        else:
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"a {target} compare takes an int")
            cmp.number = value
        self._compares.append(cmp)
        return self

    def if_value(self, key: Bytesish, op: str, value: Bytesish) -> Self:
        return self.compare(key, "value", op, value)

    def if_version(self, key: Bytesish, op: str, version: int) -> Self:
        """version 0 means the key does not exist."""
        return self.compare(key, "version", op, version)

    def if_create(self, key: Bytesish, op: str, revision: int) -> Self:
        return self.compare(key, "create", op, revision)

    def if_mod(self, key: Bytesish, op: str, revision: int) -> Self:
        return self.compare(key, "mod", op, revision)

    # success branch
    def then_put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                 prev_kv: bool = False) -> Self:
        self._success.append(put_op(key, value, session=session, prev_kv=prev_kv))
        return self

    def then_get(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                 prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> Self:
        self._success.append(get_op(key, range_end, prefix=prefix, limit=limit,
                                    revision=revision))
        return self

    def then_delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, prev_kv: bool = False) -> Self:
        self._success.append(delete_op(key, range_end, prefix=prefix, prev_kv=prev_kv))
        return self

    # failure branch
    def else_put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                 prev_kv: bool = False) -> Self:
        self._failure.append(put_op(key, value, session=session, prev_kv=prev_kv))
        return self

    def else_get(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                 prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> Self:
        self._failure.append(get_op(key, range_end, prefix=prefix, limit=limit,
                                    revision=revision))
        return self

    def else_delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, prev_kv: bool = False) -> Self:
        self._failure.append(delete_op(key, range_end, prefix=prefix, prev_kv=prev_kv))
        return self

    def build(self, request_id: str | None = None) -> pb.TxnRequest:
        """The request; a fresh request_id unless one is given (a retry must reuse it)."""
        return pb.TxnRequest(
            compares=self._compares, success=self._success, failure=self._failure,
            request_id=request_id if request_id is not None else new_request_id(),
        )


def put_op(key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
           prev_kv: bool = False) -> pb.RequestOp:
    return pb.RequestOp(put=pb.PutRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=session_id_of(session),
        prev_kv=prev_kv))


def get_op(key: Bytesish | None = None, range_end: Bytesish | None = None, *,
           prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> pb.RequestOp:
    return pb.RequestOp(range=range_request(key, range_end, prefix=prefix, limit=limit,
                                            revision=revision))


def delete_op(key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, prev_kv: bool = False) -> pb.RequestOp:
    return pb.RequestOp(delete_range=delete_request(key, range_end, prefix=prefix,
                                                    prev_kv=prev_kv))


# -- resumable streams --------------------------------------------------------------------


class Cursor(Protocol[T]):
    """Position in a server stream, so it can be reopened on another member."""

    service: str
    method: str

    def start_call(self) -> Call[Any] | None:
        """A read to run before the first open (None: nothing to resolve)."""

    def started(self, result: Any) -> None: ...

    def request(self) -> Message: ...

    def feed(self, response: Any) -> list[T]:
        """Items to deliver from one response (repeats after a resume are dropped)."""

    def on_error(self, err: CoordError) -> bool:
        """True: reopen the stream; False: the error goes to the caller."""


class WatchCursor:
    """A KV watch's position. `from_revision` 0 (changes from now on) is pinned first to
    the current revision + 1 by a read, so a reconnect cannot skip changes made between
    the read and the reopen. A reopened watch starts again AT the last delivered
    revision, and drops that revision's events it already delivered: a revision's events
    may span responses, so resuming at revision + 1 could lose some."""

    service = "KV"
    method = "Watch"

    def __init__(
        self, key: bytes, range_end: bytes, from_revision: int = 0, prev_kv: bool = False
    ) -> None:
        self.key = key
        self.range_end = range_end
        self.prev_kv = prev_kv
        self.next_revision = from_revision
        self.last_revision = 0
        self._seen_at_last: set[bytes] = set()

    def start_call(self) -> Call[RangeResult] | None:
        if self.next_revision > 0 or self.last_revision > 0:
            return None
        return range_call(self.key, self.range_end or None, limit=1)

    def started(self, result: RangeResult) -> None:
        self.next_revision = result.header.revision + 1

    def request(self) -> pb.WatchRequest:
        return pb.WatchRequest(
            key=self.key, range_end=self.range_end, prev_kv=self.prev_kv,
            from_revision=self.last_revision or self.next_revision,
        )

    def feed(self, response: pb.WatchResponse) -> list[WatchEvent]:
        if response.compact_revision:
            raise CompactedError(
                "COMPACTED",
                f"watch revision {self.last_revision or self.next_revision} is compacted "
                f"(compact revision {response.compact_revision}); re-read and watch again",
                metadata={"compact_revision": str(response.compact_revision)},
            )
        if response.mode:
            rev = max(self.last_revision, self.next_revision - 1)
            return [WatchEvent("MODE", KeyValue(b"", b"", mod_revision=rev), mode=response.mode)]
        out: list[WatchEvent] = []
        for e in response.events:
            ev = watch_event(e)
            rev = ev.revision
            if rev < self.last_revision:
                continue
            if rev == self.last_revision:
                if ev.kv.key in self._seen_at_last:
                    continue
                self._seen_at_last.add(ev.kv.key)
            else:
                self.last_revision = rev
                self._seen_at_last = {ev.kv.key}
            out.append(ev)
        return out

    def on_error(self, err: CoordError) -> bool:
        return stream_may_resume(err)


class OwnersCursor:
    """A WatchOwners position. `from_revision` > 0 replays every change since then (the
    server keeps a bounded history; a compacted start raises CompactedError); 0 starts
    with a listing of the current owners. Before the first change it resumes where it
    began (a listing again gives snapshot entries again: consumers should treat them as
    "current state"); after, it resumes at the last change's revision, which the server
    replays, and drops the changes it already delivered. If that history is compacted
    and the watch began with a listing, it starts over with one."""

    service = "Ownership"
    method = "WatchOwners"

    def __init__(self, group: str, prefix: str = "", from_revision: int = 0) -> None:
        self.group = group
        self.prefix = prefix
        self.from_revision = from_revision
        self.last_revision = 0
        self._seen_at_last: set[str] = set()

    def start_call(self) -> None:
        return None

    def started(self, result: Any) -> None:
        return None

    def request(self) -> pb.WatchOwnersRequest:
        return pb.WatchOwnersRequest(
            group=self.group, prefix=self.prefix,
            from_revision=self.last_revision or self.from_revision,
        )

    def feed(self, response: pb.OwnerChange) -> list[OwnerChange]:
        change = owner_change(response)
        if change.snapshot or change.mode:
            return [change]
        rev = change.owner.revision
        if rev < self.last_revision:
            return []
        if rev == self.last_revision:
            if change.owner.resource in self._seen_at_last:
                return []
            self._seen_at_last.add(change.owner.resource)
        else:
            self.last_revision = rev
            self._seen_at_last = {change.owner.resource}
        return [change]

    def on_error(self, err: CoordError) -> bool:
        if isinstance(err, CompactedError) and self.from_revision == 0 and self.last_revision:
            self.last_revision = 0
            self._seen_at_last = set()
            return True
        return stream_may_resume(err)


# -- sessions -----------------------------------------------------------------------------

TERMINAL_EVENTS: frozenset[str] = frozenset({"severed", "expired", "released", "closed"})
GONE = "gone"


@dataclass
class SessionCore:
    """Liveness bookkeeping of one session (shared by Session and AsyncSession): the TTL
    as last granted, when a keepalive was last acknowledged, the cluster mode, and how the
    session ended. `end()` is true exactly once, so the owner is told exactly once."""

    session_id: int
    ttl: float
    name: str = ""
    clock: Callable[[], float] = time.monotonic
    mode: str = "read-write"
    ended: SessionEvent | None = None
    closing: bool = False  # the client itself is closing it: not a loss to report
    _acked_at: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._acked_at = self.clock()

    @property
    def interval(self) -> float:
        """Keepalive period: a third of the TTL, so two lost keepalives are survivable."""
        return max(0.05, self.ttl / 3)

    def request(self) -> pb.KeepAliveRequest:
        return pb.KeepAliveRequest(session_id=self.session_id)

    def acked(self, sent_at: float, response: pb.KeepAliveResponse) -> SessionEvent | None:
        """Record a keepalive answer; the end event if the server says the session is gone.
        The TTL runs from when the acknowledged keepalive was SENT (the conservative end)."""
        if response.gone:
            return self.gone("keepalive: the server reports the session gone")
        if response.read_only:
            self.mode = "read-only"
            return None  # answered, not renewed: the TTL keeps running down
        if response.pending:
            return None  # the member is alive but no leader renewed it (yet)
        if response.ttl_ms > 0:
            self.ttl = response.ttl_ms / 1000
        self._acked_at = max(self._acked_at, sent_at)
        return None

    def stalled(self, oldest_unacked: float | None) -> bool:
        """A keepalive unanswered for a whole interval: the member is stuck, move on."""
        return oldest_unacked is not None and self.clock() - oldest_unacked > self.interval

    def remaining(self) -> float:
        """Seconds the session is known to live without another acknowledged keepalive."""
        return max(0.0, self._acked_at + self.ttl - self.clock())

    def gone(self, message: str) -> SessionEvent:
        return SessionEvent(GONE, self.session_id, message=message)

    def moved(self, change: ModeChange) -> SessionEvent | None:
        """The client found a read-write member: the mode_changed event to deliver, if
        this session did not know yet (None once it ended)."""
        if self.ended is not None or self.mode == change.mode:
            return None
        return SessionEvent("mode_changed", self.session_id, mode=change.mode,
                            member=change.member)

    def observe(self, event: SessionEvent) -> bool:
        """Track the mode; True if `event` ends the session."""
        if event.type == "mode_changed" and event.mode:
            self.mode = event.mode
        return event.type in TERMINAL_EVENTS

    def end(self, event: SessionEvent) -> bool:
        """Record the end; True only the first time."""
        with self._lock:
            if self.ended is not None:
                return False
            self.ended = event
            return True

    @property
    def report_loss(self) -> bool:
        """Whether an end should reach on_severed: not when the client closed it itself."""
        return not self.closing


def describe_end(event: SessionEvent) -> str:
    """One line on why a session ended (for logs and the CLI)."""
    if event.type == "severed":
        return (f"session {event.session_id} severed: session {event.new_owner} claimed "
                f"{event.group}/{event.resource} at generation {event.generation}")
    if event.type == GONE:
        return f"session {event.session_id} is gone ({event.message or 'ended'})"
    return f"session {event.session_id} {event.type}"
