"""Majority arithmetic over a set of voters (single-step membership changes only)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from enum import Enum


class VoteResult(Enum):
    PENDING = 0
    WON = 1
    LOST = 2


def quorum_size(voters: Collection[int]) -> int:
    return len(voters) // 2 + 1


def committed_index(voters: Collection[int], match: Callable[[int], int]) -> int:
    """The highest index that a majority of `voters` has durably acknowledged."""
    if not voters:
        return 0
    acked = sorted((match(v) for v in voters), reverse=True)
    return acked[quorum_size(voters) - 1]


def vote_result(voters: Collection[int], votes: Mapping[int, bool]) -> VoteResult:
    granted = sum(1 for v in voters if votes.get(v) is True)
    rejected = sum(1 for v in voters if votes.get(v) is False)
    need = quorum_size(voters)
    if granted >= need:
        return VoteResult.WON
    if len(voters) - rejected < need:
        return VoteResult.LOST
    return VoteResult.PENDING


def has_quorum(voters: Collection[int], present: Callable[[int], bool]) -> bool:
    """Are a majority of `voters` `present`? Asked several times per write round (a
    leader's soft state is its CheckQuorum view), so it stops at the majority, with no
    generator to resume per voter."""
    need = quorum_size(voters)
    for v in voters:
        if present(v):
            need -= 1
            if not need:
                return True
    return False
