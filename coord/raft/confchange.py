"""Membership changes, one server at a time.

Single-step changes are safe when (a) at most one change is in flight (the leader refuses a
new one until the last is applied) and (b) the leader has committed an entry of its own term
before proposing one (Ongaro's fix for the single-server-change bug). Both rules are enforced
by the leader in `raft.Raft.propose_conf_change`.
"""

from __future__ import annotations

import struct

from .types import ConfChange, ConfChangeType, ConfState

_HEADER = struct.Struct(">BQ")


def encode_conf_change(cc: ConfChange) -> bytes:
    return _HEADER.pack(int(cc.type), cc.node_id) + cc.context


def decode_conf_change(data: bytes) -> ConfChange:
    if len(data) < _HEADER.size:
        raise ValueError(f"conf change entry too short ({len(data)} bytes)")
    kind, node_id = _HEADER.unpack_from(data)
    return ConfChange(ConfChangeType(kind), node_id, bytes(data[_HEADER.size :]))


def apply_to(conf: ConfState, cc: ConfChange) -> ConfState:
    """The configuration after `cc`; raises ValueError for a change that is not allowed."""
    voters, learners = set(conf.voters), set(conf.learners)
    if cc.node_id == 0:
        raise ValueError("node id 0 is reserved")
    if cc.type is ConfChangeType.ADD_VOTER:
        learners.discard(cc.node_id)
        voters.add(cc.node_id)
    elif cc.type is ConfChangeType.ADD_LEARNER:
        if cc.node_id in voters:
            raise ValueError(f"node {cc.node_id:x} is a voter; demoting is not supported")
        learners.add(cc.node_id)
    elif cc.type is ConfChangeType.REMOVE_NODE:
        if voters == {cc.node_id}:
            raise ValueError("cannot remove the last voter")
        voters.discard(cc.node_id)
        learners.discard(cc.node_id)
    return ConfState(frozenset(voters), frozenset(learners))
