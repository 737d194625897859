"""One `Call` per API method: the request, how to convert its answer, and whether it is
safe to send again.

Building a request is where the client decides what a retry may do: every write that
supports one gets a fresh request_id here (its retries reuse it, so the state machine
applies the write once even if a reply was lost), and reads are marked `linearizable`
unless the caller asked for a serializable (possibly stale) read. The transport-free
half of every client method lives here, so the asyncio client and the sync facade over
it build exactly the same requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from coord.client.errors import error_for
from coord.client.keys import Bytesish, key_range, to_bytes
from coord.client.results import (
    CasResult,
    DeleteResult,
    Header,
    KeyValue,
    Owner,
    OwnerRead,
    OwnResult,
    PidBlock,
    PidLease,
    Producer,
    PutResult,
    RangeResult,
    ReleaseResult,
    SessionInfo,
    TxnResult,
    cas_result,
    delete_result,
    first_kv,
    header,
    lease_result,
    own_result,
    owner,
    put_result,
    range_result,
    txn_result,
)
from coord.v1 import coord_pb2 as pb

T = TypeVar("T")


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


def new_request_id() -> str:
    """A fresh id for one logical write; its retries reuse it, so the server applies the
    write at most once even if a reply was lost."""
    return uuid.uuid4().hex


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


def writer_session_id(session: SessionRef | None) -> int:
    """`session_id_of` for a write bound to the session (own, release, a session's key):
    a member-local session cannot be one until its member registers it with the cluster
    (its `registered` event), so that is refused here, saying so."""
    if getattr(session, "local", False):
        raise error_for(
            "READ_ONLY",
            f"session {session_id_of(session)} is member-local (opened by a read-only "
            "member): it can read and watch, and owns or writes once its member rejoins a "
            "majority and registers it",
            grpc.StatusCode.FAILED_PRECONDITION,
        )
    return session_id_of(session)


def finish(call: Call[T], response: Any, read_only_ok: bool) -> T:
    """Convert a response; a linearizable read answered from a read-only member is an
    error unless the client accepts read-only service (it fails over to another member)."""
    if call.linearizable and not read_only_ok and response.header.read_only:
        raise error_for(
            "NO_QUORUM", f"member {response.header.member or '?'} has no quorum (stale read)",
            grpc.StatusCode.UNAVAILABLE,
        )
    return call.convert(response)


def header_facts(header: Any) -> tuple[str, int, int]:
    """(member, term, revision) of a response header, for a mode_changed event."""
    return header.member, header.raft_term, header.revision


def served_read_only(response: Any) -> bool:
    """Whether a response came from a read-only member (it carries a header saying so)."""
    header = getattr(response, "header", None)
    return bool(header is not None and header.read_only)


# -- requests -----------------------------------------------------------------------------


def put_call(
    key: Bytesish, value: Bytesish, *, session: SessionRef | None = None, prev_kv: bool = False
) -> Call[PutResult]:
    req = pb.PutRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=writer_session_id(session),
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


def range_call(request: pb.RangeRequest) -> Call[RangeResult]:
    return Call("KV", "Range", request, range_result, safe=True,
                linearizable=not request.serializable)


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
) -> pb.DeleteRangeRequest:
    k, end = key_range(key, range_end, prefix)
    return pb.DeleteRangeRequest(key=k, range_end=end, prev_kv=prev_kv)


def delete_call(request: pb.DeleteRangeRequest) -> Call[DeleteResult]:
    """Gives `request` (new from `delete_request`) a fresh request_id: its retries reuse it."""
    request.request_id = new_request_id()
    return Call("KV", "DeleteRange", request, delete_result, safe=True)


def txn_call(request: pb.TxnRequest) -> Call[TxnResult]:
    if not request.request_id:
        raise ValueError("a txn request needs a request_id (TxnBuilder.build adds one)")
    return Call("KV", "Txn", request, txn_result, safe=True)


def put_if_absent_call(
    key: Bytesish, value: Bytesish, *, session: SessionRef | None = None
) -> Call[CasResult]:
    req = pb.PutIfAbsentRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=writer_session_id(session),
        request_id=new_request_id(),
    )
    return Call("KV", "PutIfAbsent", req, cas_result, safe=True)


def compare_and_set_call(
    key: Bytesish, expected_version: int, value: Bytesish, *, session: SessionRef | None = None
) -> Call[CasResult]:
    req = pb.CompareAndSetRequest(
        key=to_bytes(key), expected_version=expected_version, value=to_bytes(value),
        session_id=writer_session_id(session), request_id=new_request_id(),
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
        lambda r: SessionInfo(header(r.header), r.session_id, r.ttl_ms / 1000, r.local),
        safe=True,
    )


def close_session_call(session: SessionRef) -> Call[Header]:
    # Safe to repeat: a repeat of an applied close answers UNKNOWN_SESSION, which the
    # callers treat as "closed".
    req = pb.CloseSessionRequest(session_id=session_id_of(session))
    return Call("Sessions", "CloseSession", req, lambda r: header(r.header), safe=True)


ClaimLike = str | tuple[str, int] | pb.Claim


BARE_CLAIM_GENERATION = 1


def claim_columns(claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> pb.ClaimColumns:
    """Claims as resource names, (resource, generation) pairs, or a {resource: generation}
    mapping, as the request's two columns. A bare name claims at generation 1: it takes a
    free resource (at its last generation + 1) and severs only an owner still at
    generation 1; it never resets the generation the way an explicit 0 does, so
    generations stay usable as fencing tokens."""
    if isinstance(claims, str):
        claims = [claims]
    if isinstance(claims, Mapping):
        claims = list(claims.items())
    resources: list[str] = []
    generations: list[int] = []
    for c in claims:
        if isinstance(c, pb.Claim):
            resource, generation = c.resource, c.generation
        elif isinstance(c, str):
            resource, generation = c, BARE_CLAIM_GENERATION
        else:
            resource, generation = c
        resources.append(resource)
        generations.append(generation)
    return pb.ClaimColumns(resources=resources, generations=generations)


def own_call(
    session: SessionRef, group: str, claims: Iterable[ClaimLike] | Mapping[str, int] | str
) -> Call[OwnResult]:
    req = pb.OwnRequest(
        session_id=writer_session_id(session), group=group,
        claim_columns=claim_columns(claims),
        request_id=new_request_id(),
    )
    return Call("Ownership", "Own", req, own_result, safe=True)


def release_call(
    session: SessionRef, group: str, resources: Iterable[str] | str
) -> Call[ReleaseResult]:
    names = [resources] if isinstance(resources, str) else list(resources)
    req = pb.ReleaseRequest(
        session_id=writer_session_id(session), group=group, resources=names,
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


def read_owner_call(group: str, resource: str) -> Call[OwnerRead]:
    """GetOwner, linearizable, answered with its header (`OwnerRead`)."""
    req = pb.GetOwnerRequest(group=group, resource=resource)
    return Call("Ownership", "GetOwner", req,
                lambda r: OwnerRead(header(r.header), owner(r.owner)), safe=True,
                linearizable=True)


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
