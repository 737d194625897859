"""What a command returns to its proposer, and its wire format.

Every result carries `error` ("" on success), a human `message`, and `revision`: the
revision the command's changes happened at, or the current revision if it changed
nothing. Each command has one result type, so a failed command still decodes as the
type the caller expects. Encoding: `[version][tag]` + the fields, packed or as canonical
JSON (`coord.sm.framing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coord.sm import framing
from coord.sm.records import Conflict, Grant, KeyValue, Owner, OwnershipEvent, WatchEvent

FORMAT_VERSION = framing.JSON_VERSION
PACKED_VERSION = framing.PACKED_VERSION  # a put's without prev_kv, an own's, most errors


@dataclass(frozen=True, kw_only=True)
class Result:
    """The common part; also the result of an undecodable command or a Barrier."""

    error: str = ""
    message: str = ""
    revision: int = 0

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True, kw_only=True)
class PutResult(Result):
    prev_kv: KeyValue | None = None


@dataclass(frozen=True, kw_only=True)
class RangeResult(Result):
    kvs: tuple[KeyValue, ...] = ()
    count: int = 0  # matching keys, before `limit`
    more: bool = False


@dataclass(frozen=True, kw_only=True)
class DeleteRangeResult(Result):
    deleted: int = 0
    prev_kvs: tuple[KeyValue, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TxnResult(Result):
    succeeded: bool = False
    responses: tuple[PutResult | RangeResult | DeleteRangeResult | TxnResult, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CompactResult(Result):
    compact_revision: int = 0


@dataclass(frozen=True, kw_only=True)
class EventsResult(Result):
    events: tuple[WatchEvent, ...] = ()
    compact_revision: int = 0  # with COMPACTED: watches must start after this


@dataclass(frozen=True, kw_only=True)
class SessionResult(Result):
    session_id: int = 0
    ttl_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class ExpireResult(Result):
    expired: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OwnResult(Result):
    group: str = ""
    grants: tuple[Grant, ...] = ()  # in request order
    severed: tuple[int, ...] = ()  # sessions severed by this claim
    conflicts: tuple[Conflict, ...] = ()  # with OWNED_BY_HIGHER_GENERATION


@dataclass(frozen=True, kw_only=True)
class ReleaseResult(Result):
    group: str = ""
    released: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OwnerResult(Result):
    group: str = ""
    resource: str = ""
    owner: int = 0  # 0: nobody owns it now
    generation: int = 0  # current, or last if free (0: never claimed)
    owner_revision: int = 0  # revision of the last grant or release


@dataclass(frozen=True, kw_only=True)
class ListOwnersResult(Result):
    group: str = ""
    owners: tuple[Owner, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OwnerEventsResult(Result):
    group: str = ""
    events: tuple[OwnershipEvent, ...] = ()  # in revision order
    compact_revision: int = 0  # with COMPACTED: watches must start after this


@dataclass(frozen=True, kw_only=True)
class PidBlockResult(Result):
    start: int = 0  # the block is [start, start + size)
    size: int = 0


@dataclass(frozen=True, kw_only=True)
class LeasePidResult(Result):
    pid: int = 0
    generation: int = 0
    sequence_number: int = 0
    expire_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class ProducerResult(Result):
    pid: int = 0
    generation: int = 0


@dataclass(frozen=True, kw_only=True)
class AlarmResult(Result):
    alarms: tuple[str, ...] = ()  # "member_id:KIND": the alarm raised, or lowered if it was up


_TAGS: dict[type, int] = {
    Result: 0,
    PutResult: 1,
    RangeResult: 2,
    DeleteRangeResult: 3,
    TxnResult: 4,
    CompactResult: 5,
    EventsResult: 6,
    SessionResult: 10,
    ExpireResult: 12,
    OwnResult: 20,
    ReleaseResult: 21,
    OwnerResult: 22,
    ListOwnersResult: 23,
    OwnerEventsResult: 24,
    PidBlockResult: 30,
    LeasePidResult: 31,
    ProducerResult: 32,
    AlarmResult: 41,
}
_BY_TAG: dict[int, type] = {tag: cls for cls, tag in _TAGS.items()}


class Answer:
    """A command's result as the machine answers it: the value (`value`), for a proposer
    on this member, and its encoding (`data`), for one on another member and for the
    request-id memory. Each side is made from the other on first use and kept: a local
    proposer takes the very result the machine made, nothing encoded or decoded; the
    leader encodes a forwarded command's result once, for the memory and the follower
    alike; a remembered answer is decoded only when a local retry reads it. Results are
    immutable records, so encoding one later gives the bytes it gave at apply."""

    __slots__ = ("_data", "_value")

    def __init__(self, value: Result | None = None, data: bytes | None = None) -> None:
        if (value is None) == (data is None):
            raise ValueError("an answer is made from a result or from its bytes")
        self._value = value
        self._data = data

    @property
    def value(self) -> Any:
        if self._value is None:
            self._value = decode_result(self._data)
        return self._value

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = encode_result(self._value)
        return self._data


def encode_result(result: Result) -> bytes:
    try:
        tag = _TAGS[type(result)]
    except KeyError:
        raise ValueError(f"not a result: {type(result).__name__}") from None
    return framing.encode(tag, result)


def decode_result(data: bytes) -> Any:
    """The result `data` encodes (a Result subclass); ValueError for anything else."""
    return framing.decode(data, _BY_TAG, "result")
