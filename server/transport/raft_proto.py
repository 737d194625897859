"""Conversion between the Raft core's dataclasses (coord.raft.types) and protobuf (coord.v1).

This sits on the replication hot path, so the functions avoid generic reflection: protobuf
messages are filled field by field (only non-default fields are set), repeated entries are
appended in place rather than copied from an intermediate list, and enum values are mapped
with tuple look-ups instead of calling the IntEnum constructor.

Decoding rejects values the core does not know (an unknown message, entry or conf change
type) with ``ValueError``; callers that read from the network should drop such messages.
"""

from __future__ import annotations

from coord.raft.types import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)
from coord.v1 import raft_pb2

__all__ = ["fill_message_pb", "message_from_pb", "message_to_pb"]

# Index = wire value. IntEnum values are dense and start at 0 for both enums.
_MESSAGE_TYPES: tuple[MessageType, ...] = tuple(sorted(MessageType))
_ENTRY_TYPES: tuple[EntryType, ...] = tuple(sorted(EntryType))
assert [int(t) for t in _MESSAGE_TYPES] == list(range(len(_MESSAGE_TYPES)))
assert [int(t) for t in _ENTRY_TYPES] == list(range(len(_ENTRY_TYPES)))

_PbMessage = raft_pb2.Message


def _unknown(kind: str, value: int) -> ValueError:
    return ValueError(f"unknown {kind} type {value}")


# --- entries -------------------------------------------------------------------------------


def _fill_entry(x: raft_pb2.Entry, e: Entry) -> None:
    x.term = e.term
    x.index = e.index
    if e.type:
        x.type = e.type
    if e.data:
        x.data = e.data


def _entries_from_pb(entries) -> tuple[Entry, ...]:
    types = _ENTRY_TYPES
    try:
        return tuple([Entry(p.term, p.index, types[p.type], p.data) for p in entries])
    except IndexError:
        bad = next(p.type for p in entries if p.type >= len(types))
        raise _unknown("entry", bad) from None


# --- conf state, conf change, snapshot --------------------------------------------------


def _fill_conf_state(x: raft_pb2.ConfState, cs: ConfState) -> None:
    if cs.voters:
        x.voters.extend(sorted(cs.voters))
    if cs.learners:
        x.learners.extend(sorted(cs.learners))


def conf_state_from_pb(p: raft_pb2.ConfState) -> ConfState:
    return ConfState(voters=frozenset(p.voters), learners=frozenset(p.learners))


def _fill_snapshot(x: raft_pb2.Snapshot, s: Snapshot) -> None:
    meta = s.meta
    md = x.metadata
    md.index = meta.index
    md.term = meta.term
    # Touch conf_state so the submessage is present even when empty.
    md.conf_state.SetInParent()
    _fill_conf_state(md.conf_state, meta.conf_state)
    if s.data:
        x.data = s.data


def snapshot_from_pb(p: raft_pb2.Snapshot) -> Snapshot:
    md = p.metadata
    meta = SnapshotMeta(index=md.index, term=md.term, conf_state=conf_state_from_pb(md.conf_state))
    return Snapshot(meta=meta, data=p.data)


# --- messages ------------------------------------------------------------------------------


def message_to_pb(m: Message) -> raft_pb2.Message:
    x = _PbMessage()
    fill_message_pb(x, m)
    return x


def fill_message_pb(x: raft_pb2.Message, m: Message) -> None:
    """Write `m` into the (fresh) protobuf message `x`, e.g. one from ``batch.messages.add()``.

    Filling in place avoids the copy that appending a finished message to a repeated field
    costs.
    """
    x.type = m.type
    x.to = m.to
    setattr(x, "from", m.frm)  # noqa: B010 - `from` is a Python keyword
    if m.term:
        x.term = m.term
    if m.log_term:
        x.log_term = m.log_term
    if m.index:
        x.index = m.index
    if m.entries:
        add = x.entries.add
        for e in m.entries:
            _fill_entry(add(), e)
    if m.commit:
        x.commit = m.commit
    if m.snapshot is not None:
        _fill_snapshot(x.snapshot, m.snapshot)
    if m.reject:
        x.reject = True
    if m.reject_hint:
        x.reject_hint = m.reject_hint
    if m.context:
        x.context = m.context


def message_from_pb(p: raft_pb2.Message) -> Message:
    try:
        t = _MESSAGE_TYPES[p.type]
    except IndexError:
        raise _unknown("message", p.type) from None
    return Message(
        t,
        p.to,
        getattr(p, "from"),
        p.term,
        p.log_term,
        p.index,
        _entries_from_pb(p.entries) if p.entries else (),
        p.commit,
        snapshot_from_pb(p.snapshot) if p.HasField("snapshot") else None,
        p.reject,
        p.reject_hint,
        p.context,
    )
