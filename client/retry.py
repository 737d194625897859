"""When a failed request may be sent again, to which member, and after how long.

The client repeats only what is safe: reads, writes that carry a request_id (the state
machine answers a repeated id from memory), and any request whose error proves it was
not applied. Every operation gets a bounded budget (`Attempts`): a number of tries and a
total time, with a short jittered pause that grows per pass over the endpoints.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from coord.client.errors import CoordError, DeadlineError, UnavailableError, error_for
from coord.wire import stream_broke

__all__ = [
    "ELECTION_PATIENCE",
    "NOT_APPLIED_REASONS",
    "WAIT_REASONS",
    "Attempts",
    "RetryPolicy",
    "may_fail_over",
    "stream_may_resume",
]

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
    are reads, so any transient failure qualifies, including a stream that broke (a member
    shutting down cancels its streams; one killed mid-stream leaves gRPC's INTERNAL)."""
    return may_fail_over(err, True) or stream_broke(err.code, err.reason)


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
    no_quorum_patience: float = 1.2
    """Give up once every member that answers has said NO_QUORUM for this long (a longest
    default election timeout): an election would have ended by then, the cluster has
    lost its majority, and the caller is better told so than kept waiting."""

    def attempts(self, endpoints: int) -> int:
        return max(self.min_attempts, self.rounds * max(1, endpoints))

    def delay(self, failures: int, endpoints: int) -> float:
        """Pause before try `failures + 1`: short between members, longer per pass."""
        passes = max(0, failures - 1) // max(1, endpoints)
        base = min(self.max_backoff, self.backoff * (2**passes))
        return base * (0.5 + random.random() / 2)


WAIT_REASONS: frozenset[str] = frozenset({"NO_LEADER", "NO_QUORUM"})
ELECTING_REASONS: frozenset[str] = frozenset({"NO_LEADER", "NOT_LEADER", "PROPOSAL_LOST"})
"""Answers that say an election is under way or over: a NO_QUORUM streak starts again."""
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
        self._no_quorum_since: float | None = None  # since when every answer said so
        self._no_quorum_members: dict[str, str] = {}  # member -> what it said
        self._quorumless_for: float | None = None  # set when that streak ended the try
        self._uncertain: CoordError | None = None  # a failure that may have been applied
        self._electing = False

    def call_timeout(self) -> float:
        """The deadline for the next try: the per-call timeout, cut to what is left."""
        return max(0.001, min(self.timeout, self._deadline - self._clock()))

    def final(self, err: CoordError) -> CoordError:
        """The error to raise on giving up: NoQuorumError if a member said it has no quorum
        and no other member did better (the rest unreachable or stuck). A READ_ONLY
        refusal after an earlier try whose outcome is unknown is not "not applied": that
        try may have been (found by the chaos harness), so the unknown outcome is raised."""
        if err.reason == "READ_ONLY" and self._uncertain is not None:
            u = self._uncertain
            why = f"an earlier try may have been applied ({u.message or u.reason}); " \
                  f"then {err.message or err.reason}"
            return error_for(u.reason, why, u.code, u.metadata)
        if self._no_quorum is None or not isinstance(err, (UnavailableError, DeadlineError)):
            return err
        if self._quorumless_for is not None:
            said = "; ".join(f"{m}: {msg}" for m, msg in self._no_quorum_members.items())
            return error_for(
                "NO_QUORUM",
                f"the cluster has no quorum: for {self._quorumless_for:.1f}s every member "
                f"that answered said so ({said})",
                grpc.StatusCode.UNAVAILABLE,
            )
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
            if self._no_quorum_since is None:
                self._no_quorum_since = self._clock()
            self._no_quorum_members[err.metadata.get("member", "?")] = err.message
        elif err.reason in ELECTING_REASONS:
            self._no_quorum_since = None
            self._no_quorum_members.clear()
        if err.reason not in NOT_APPLIED_REASONS:
            self._uncertain = err
        self._electing = self._electing or err.reason in WAIT_REASONS
        if not may_fail_over(err, safe):
            return None
        if self._no_quorum_since is not None:
            lasted = self._clock() - self._no_quorum_since
            if lasted >= self.policy.no_quorum_patience:
                self._quorumless_for = lasted
                return None  # no majority anywhere for an election timeout: say so now
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
