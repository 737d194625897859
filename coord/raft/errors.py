"""Why the core refused a request. The driver turns these into API errors."""

from __future__ import annotations


class RaftError(Exception):
    pass


class NotLeaderError(RaftError):
    """Only the leader accepts proposals; `leader` is who to ask instead (0: unknown)."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"not the leader (leader is {leader or 'unknown'})")
        self.leader = leader


class ProposalDroppedError(RaftError):
    """The leader could not take the proposal now (leadership transfer, conf change pending)."""


class CompactedError(RaftError):
    """The requested index is older than the log's compaction point."""
