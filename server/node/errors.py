"""Why the node could not carry out a request. Each class has a machine-readable
`reason`; the APIs map reasons to status codes (coord.wire), and the request path tells
"may have been applied" (OutcomeUnknown, ProposalLost, Timeout) from "was not"."""

from __future__ import annotations

from coord.server.node.members import MemberInfo


class NodeError(Exception):
    """A request the node could not carry out; `reason` is machine-readable."""

    reason = "UNAVAILABLE"


class NotLeader(NodeError):
    reason = "NOT_LEADER"

    def __init__(self, leader: MemberInfo | None) -> None:
        where = f"{leader.name} at {leader.peer_address}" if leader else "unknown"
        super().__init__(f"this member is not the leader (leader: {where})")
        self.leader = leader


class OutcomeUnknown(NodeError):
    """The command may or may not have been applied (e.g. a snapshot replaced the log
    while it was pending): retry only with a request id."""

    reason = "OUTCOME_UNKNOWN"


class NoLeader(NodeError):
    reason = "NO_LEADER"


class ProposalLost(NodeError):
    reason = "PROPOSAL_LOST"


class Timeout(NodeError):
    reason = "TIMEOUT"


class Stopped(NodeError):
    reason = "STOPPED"
