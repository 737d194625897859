"""Machine-readable error reasons carried in results.

Errors are results, not exceptions: every member computes the same error for the same
command, and a rejected command changes nothing. `CommandError` exists only to unwind
validation inside the state machine; the operation boundary turns it into a result.
"""

from __future__ import annotations

from typing import Any

INVALID_ARGUMENT = "INVALID_ARGUMENT"
TOO_LARGE = "TOO_LARGE"
UNKNOWN_SESSION = "UNKNOWN_SESSION"
OWNED_BY_HIGHER_GENERATION = "OWNED_BY_HIGHER_GENERATION"
COMPACTED = "COMPACTED"
FUTURE_REVISION = "FUTURE_REVISION"
PRODUCER_FENCED = "PRODUCER_FENCED"
UNKNOWN_PRODUCER = "UNKNOWN_PRODUCER"
UNKNOWN_PID = "UNKNOWN_PID"
PID_CAPACITY_EXHAUSTED = "PID_CAPACITY_EXHAUSTED"
REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
SESSION_EXISTS = "SESSION_EXISTS"  # an OpenSession asked for the id of a live session
KEY_NOT_FOUND = "KEY_NOT_FOUND"  # a Put with ignore_value/ignore_lease on a missing key
NO_SPACE = "NO_SPACE"  # a member is over its space quota: writes that add state wait
LIMIT_EXCEEDED = "LIMIT_EXCEEDED"  # too many sessions, or resources owned by one session

ALL = frozenset(
    {
        INVALID_ARGUMENT,
        TOO_LARGE,
        UNKNOWN_SESSION,
        OWNED_BY_HIGHER_GENERATION,
        COMPACTED,
        FUTURE_REVISION,
        PRODUCER_FENCED,
        UNKNOWN_PRODUCER,
        UNKNOWN_PID,
        PID_CAPACITY_EXHAUSTED,
        REQUEST_ID_REUSED,
        SESSION_EXISTS,
        KEY_NOT_FOUND,
        NO_SPACE,
        LIMIT_EXCEEDED,
    }
)


class CommandError(Exception):
    """A command was refused before it changed anything; `details` fill result fields."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details
