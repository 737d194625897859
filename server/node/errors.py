"""Why the node could not carry out a request. Each class has a machine-readable
`reason` with its status code in the wire contract (`as_api_error`), and the request
path tells "may have been applied" (OutcomeUnknown, ProposalLost, Timeout) from "was
not"."""

from __future__ import annotations

from coord.server.node.members import MemberInfo
from coord.wire import ApiError, node_error_code


class NodeError(Exception):
    """A request the node could not carry out; `reason` is machine-readable."""

    reason = "UNAVAILABLE"

    def as_api_error(self) -> ApiError:
        """This error as the APIs answer it, and as a leader answers a forwarded command."""
        return ApiError(node_error_code(self.reason), self.reason, str(self))


class NotLeader(NodeError):
    reason = "NOT_LEADER"

    def __init__(self, leader: MemberInfo | None) -> None:
        where = f"{leader.name} at {leader.peer_address}" if leader else "unknown"
        super().__init__(f"this member is not the leader (leader: {where})")
        self.leader = leader

    def as_api_error(self) -> ApiError:
        """With the leader's name and peer address, when known: the client's hint."""
        err = super().as_api_error()
        if self.leader is not None:
            err.metadata = {"leader": self.leader.name,
                            "leader_peer_address": self.leader.peer_address}
        return err


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
