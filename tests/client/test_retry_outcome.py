"""The client never reports "not applied" for a write one of whose tries may have been
(found by `coord chaos`, seed 103): a try that timed out, then a read-only member's
READ_ONLY refusal, gives up with the unknown outcome, not ReadOnlyError."""

from __future__ import annotations

from coord.client import DeadlineError, ReadOnlyError, RetryPolicy, UnavailableError
from coord.client.retry import Attempts


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _attempts() -> Attempts:
    return Attempts(RetryPolicy(), 3, timeout=5.0, clock=_Clock())


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
