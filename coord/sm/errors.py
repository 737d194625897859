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
# etcd's auth (coord.sm.auth): each is one of etcd's auth errors
PERMISSION_DENIED = "PERMISSION_DENIED"  # the actor may not do this
AUTH_NOT_ENABLED = "AUTH_NOT_ENABLED"  # a login while auth is off
AUTH_FAILED = "AUTH_FAILED"  # a login's user went away before it committed
ROOT_USER_MISSING = "ROOT_USER_MISSING"  # auth enabled without a root user
ROOT_ROLE_MISSING = "ROOT_ROLE_MISSING"  # ... or with one that lacks the root role
INVALID_AUTH_MGMT = "INVALID_AUTH_MGMT"  # removing root's user, role or grant while auth is on
USER_EMPTY = "USER_EMPTY"
USER_EXISTS = "USER_EXISTS"
USER_NOT_FOUND = "USER_NOT_FOUND"
ROLE_EMPTY = "ROLE_EMPTY"
ROLE_EXISTS = "ROLE_EXISTS"
ROLE_NOT_FOUND = "ROLE_NOT_FOUND"
ROLE_NOT_GRANTED = "ROLE_NOT_GRANTED"
PERMISSION_NOT_GRANTED = "PERMISSION_NOT_GRANTED"

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
        PERMISSION_DENIED,
        AUTH_NOT_ENABLED,
        AUTH_FAILED,
        ROOT_USER_MISSING,
        ROOT_ROLE_MISSING,
        INVALID_AUTH_MGMT,
        USER_EMPTY,
        USER_EXISTS,
        USER_NOT_FOUND,
        ROLE_EMPTY,
        ROLE_EXISTS,
        ROLE_NOT_FOUND,
        ROLE_NOT_GRANTED,
        PERMISSION_NOT_GRANTED,
    }
)


class CommandError(Exception):
    """A command was refused before it changed anything; `details` fill result fields."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details
