"""When the client sends a failed request again, and what it reports when it gives up
(coord.client.retry), on a clock the test moves: only what is safe is repeated, the
attempts are bounded by count and by time, an election is ridden out, and a cluster
without a quorum is named as such. A write one of whose tries may have been applied is
never reported "not applied" (found by `coord chaos`, seed 103): a try that timed out,
then a read-only member's READ_ONLY refusal, gives up with the unknown outcome, not
ReadOnlyError."""

from __future__ import annotations

import pytest

from coord.client import (
    DeadlineError,
    InvalidArgumentError,
    NoQuorumError,
    ReadOnlyError,
    RetryPolicy,
    UnavailableError,
)
from coord.client.retry import Attempts
from tests.clocks import FakeClock


def test_retry_policy_is_bounded():
    p = RetryPolicy(rounds=2, min_attempts=3, backoff=0.05, max_backoff=1.0)
    assert p.attempts(3) == 6
    assert p.attempts(1) == 3
    delays = [p.delay(f, 3) for f in range(1, 40)]
    assert all(0 < d <= 1.0 for d in delays)
    assert max(p.delay(1, 3) for _ in range(50)) <= 0.05  # first pass: short
    assert min(p.delay(4, 3) for _ in range(50)) >= 0.05  # next pass: doubled


def test_attempts_only_repeat_what_is_safe():
    unavailable = UnavailableError("UNAVAILABLE", "member down")
    no_leader = UnavailableError("NO_LEADER", "")
    deadline = DeadlineError("TIMEOUT", "")
    invalid = InvalidArgumentError("INVALID_ARGUMENT", "")
    policy = RetryPolicy()

    def fresh() -> Attempts:
        return Attempts(policy, 3, timeout=5.0, clock=FakeClock())

    assert fresh().next_delay(unavailable, safe=True) is not None
    assert fresh().next_delay(deadline, safe=True) is not None
    assert fresh().next_delay(invalid, safe=True) is None
    # Not safe to repeat: only errors proving "not applied" fail over.
    assert fresh().next_delay(unavailable, safe=False) is None
    assert fresh().next_delay(deadline, safe=False) is None
    assert fresh().next_delay(no_leader, safe=False) is not None
    assert fresh().next_delay(NoQuorumError("NO_QUORUM", ""), safe=False) is not None
    # A read-only member refusing a write goes to the caller at once (the prober moves on).
    assert fresh().next_delay(ReadOnlyError("READ_ONLY", ""), safe=True) is None


def test_giving_up_after_no_quorum_says_no_quorum():
    a = Attempts(RetryPolicy(), 3, timeout=5.0, clock=FakeClock())
    a.next_delay(NoQuorumError("NO_QUORUM", "member n1 has no quorum"), safe=True)
    final = a.final(DeadlineError("TIMEOUT", "n2 did not answer"))
    assert isinstance(final, NoQuorumError)
    assert "n1 has no quorum" in final.message and "n2 did not answer" in final.message
    # Without a NO_QUORUM answer, the last error stands.
    b = Attempts(RetryPolicy(), 3, timeout=5.0, clock=FakeClock())
    unavailable = UnavailableError("UNAVAILABLE", "down")
    assert b.final(unavailable) is unavailable


def test_attempts_run_out_by_count_and_by_time():
    a = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=FakeClock())
    err = UnavailableError("UNAVAILABLE", "")
    delays = [a.next_delay(err, True) for _ in range(10)]
    assert delays.count(None) == 5 and delays[:5] == [d for d in delays[:5] if d is not None]
    clock = FakeClock()
    b = Attempts(RetryPolicy(rounds=100), 3, timeout=1.0, clock=clock)
    assert b.call_timeout() == 1.0
    clock.now = 2.5
    assert b.call_timeout() == pytest.approx(0.5)
    clock.now = 3.0
    assert b.next_delay(err, True) is None  # 3 x timeout spent


def test_attempts_ride_out_an_election_within_the_time_budget():
    clock = FakeClock()
    a = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=clock)
    no_quorum = NoQuorumError("NO_QUORUM", "")
    delays = [a.next_delay(no_quorum, True) for _ in range(30)]
    assert None not in delays[:23] and delays[23:] == [None] * 7  # 4 x 6 tries, not 6
    b = Attempts(RetryPolicy(rounds=2), 3, timeout=1.0, clock=clock)
    clock.now += 3.0
    assert b.next_delay(no_quorum, True) is None  # still bounded by 3 x timeout
    # The dead leader refusing connections does not cut the patience short.
    mixed = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=FakeClock())
    refused = UnavailableError("UNAVAILABLE", "connection refused")
    errors = [no_quorum, refused, no_quorum] * 7
    assert None not in [mixed.next_delay(e, True) for e in errors[:20]]


def test_attempts_give_up_once_every_answer_says_no_quorum_for_an_election_timeout():
    clock = FakeClock()
    a = Attempts(RetryPolicy(), 2, timeout=5.0, clock=clock)

    def no_quorum(member: str) -> NoQuorumError:
        return NoQuorumError("NO_QUORUM", f"member {member} has no quorum",
                             metadata={"member": member})

    refused = UnavailableError("UNAVAILABLE", "connection refused")
    delays = []
    for err in [no_quorum("n1"), refused, no_quorum("n2")] * 3:
        delays.append(a.next_delay(err, True))
        if delays[-1] is None:
            break
        clock.now += 0.25
    # 0.0 .. 1.0 s: still riding it out; at 1.25 s (>= 1.2 s of NO_QUORUM) it gives up.
    assert len(delays) == 6 and None not in delays[:5]
    final = a.final(no_quorum("n2"))
    assert isinstance(final, NoQuorumError)
    assert final.message.startswith("the cluster has no quorum: for 1.2s")  # 1.25 s
    assert "n1: member n1 has no quorum" in final.message and "n2:" in final.message
    # An election under way (NO_LEADER) starts the streak again: no early give-up.
    b = Attempts(RetryPolicy(), 2, timeout=5.0, clock=clock)
    for err in [no_quorum("n1"), UnavailableError("NO_LEADER", "")] * 4:
        assert b.next_delay(err, True) is not None
        clock.now += 0.25


def _attempts() -> Attempts:
    return Attempts(RetryPolicy(), 3, timeout=5.0, clock=FakeClock())


def test_read_only_after_an_uncertain_try_is_the_unknown_outcome():
    a = _attempts()
    assert a.next_delay(DeadlineError("TIMEOUT", "n1 did not answer"), safe=True) is not None
    refusal = ReadOnlyError("READ_ONLY", "member n3 is read-only")
    assert a.next_delay(refusal, safe=True) is None  # no failover on READ_ONLY, as before
    final = a.final(refusal)
    assert isinstance(final, DeadlineError) and not isinstance(final, ReadOnlyError)
    assert "may have been applied (n1 did not answer)" in final.message
    assert "then member n3 is read-only" in final.message


def test_read_only_stands_when_every_earlier_try_provably_did_nothing():
    a = _attempts()
    a.next_delay(UnavailableError("NO_LEADER", "electing"), safe=True)
    refusal = ReadOnlyError("READ_ONLY", "member n3 is read-only")
    a.next_delay(refusal, safe=True)
    assert a.final(refusal) is refusal
    assert _attempts().final(refusal) is refusal
