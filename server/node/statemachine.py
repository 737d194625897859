"""The contract between the replicated log and what it replicates.

`apply` must be deterministic: everything it may depend on (including the leader's clock
reading, `time_ms`) is in its arguments, so every member computes the same state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, Self

from coord.sm.results import Answer


class StateMachine(Protocol):
    def apply(self, index: int, term: int, time_ms: int, payload: bytes) -> Answer:
        """Apply one committed command; the answer goes back to the proposer (its value
        to one on this member, its bytes to one elsewhere)."""

    def snapshot(self) -> bytes:
        """Serialize the whole state (taken at the last applied index)."""

    def restore(self, data: bytes | memoryview | Iterable[bytes]) -> None:
        """Replace the whole state with a snapshot's."""

    def restored(self, data: bytes | memoryview | Iterable[bytes]) -> Self:
        """A new machine holding a snapshot's state, this one untouched: safe to run in
        another thread while this one serves (the driver restores off its loop)."""

    def adopt(self, other: Self) -> None:
        """Take over the state of `other` (a `restored` result) in one step."""

    def describe(self) -> dict:
        """A small JSON-able summary, for status and tests."""
