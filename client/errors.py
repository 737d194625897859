"""Typed client errors.

The server reports every failure as a gRPC status code plus a google.rpc.ErrorInfo whose
`reason` is machine-readable (domain "coord.dev"; the contract is `coord.wire`). Callers
should branch on the exception type (or `.reason`), never on message text;
`from_api_error` is the single place that maps a failure (a failed call, read by
`from_rpc_error`, or a pipelined operation's in-band error) to one of these classes, by
reason first and status code as a fallback (a connection failure carries no ErrorInfo at
all).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import grpc

from coord.wire import ApiError

__all__ = [
    "CoordError",
    "CompactedError",
    "DeadlineError",
    "FutureRevisionError",
    "InvalidArgumentError",
    "LimitExceededError",
    "NoQuorumError",
    "NoSpaceError",
    "OutOfRangeError",
    "OwnedByHigherGenerationError",
    "ProducerFencedError",
    "ReadOnlyError",
    "SessionGoneError",
    "UnavailableError",
    "error_for",
    "from_api_error",
    "from_rpc_error",
]


class CoordError(Exception):
    """A request failed. `reason` is the server's ErrorInfo reason (or the status code's
    name when the failure never reached coord's API, e.g. a refused connection)."""

    retryable: ClassVar[bool] = False
    default_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        reason: str,
        message: str = "",
        code: grpc.StatusCode | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason
        self.message = message
        self.code = code if code is not None else self.default_code
        self.metadata: dict[str, str] = dict(metadata or {})


class SessionGoneError(CoordError):
    """UNKNOWN_SESSION: the session expired, was closed or was severed. Anything it owned
    is gone; an owner must stop acting on its ownership."""

    default_code = grpc.StatusCode.NOT_FOUND


class OwnedByHigherGenerationError(CoordError):
    """A claimed resource is held at a higher generation than requested (nothing was
    claimed: `own` is all-or-nothing)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION

    @property
    def resource(self) -> str:
        return self.metadata.get("resource", "")

    @property
    def owner(self) -> int:
        return _int(self.metadata.get("owner"))

    @property
    def generation(self) -> int:
        return _int(self.metadata.get("generation"))


class InvalidArgumentError(CoordError):
    """The request is malformed or too large (INVALID_ARGUMENT, TOO_LARGE): retrying the
    same request can never succeed."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class OutOfRangeError(CoordError):
    """A revision outside what the server can serve."""

    default_code = grpc.StatusCode.OUT_OF_RANGE


class CompactedError(OutOfRangeError):
    """The requested revision was compacted away: re-read the current state instead."""

    @property
    def compact_revision(self) -> int:
        return _int(self.metadata.get("compact_revision"))


class FutureRevisionError(OutOfRangeError):
    """The requested revision is newer than the cluster's current revision."""


class ProducerFencedError(CoordError):
    """A newer instance of this producer exists; this one must stop producing."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class ReadOnlyError(CoordError):
    """The member lost quorum and serves reads only; the write was not applied."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class UnavailableError(CoordError):
    """The member (or the cluster) could not serve the request now; safe requests are
    retried on another member before this reaches the caller."""

    retryable = True
    default_code = grpc.StatusCode.UNAVAILABLE


class NoQuorumError(UnavailableError):
    """The member cannot reach a quorum."""


class DeadlineError(CoordError):
    """The deadline passed before an answer: a write may or may not have been applied."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class NoSpaceError(CoordError):
    """A member is over its space quota (the NOSPACE alarm): writes that add state are
    refused, whole, until space is freed (delete, compact, `coord defrag`); reads and
    deletes still work."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class LimitExceededError(CoordError):
    """Too many sessions, or too many resources owned by one session: nothing was done."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


_BY_REASON: dict[str, type[CoordError]] = {
    "NO_SPACE": NoSpaceError,
    "LIMIT_EXCEEDED": LimitExceededError,
    "UNKNOWN_SESSION": SessionGoneError,
    "OWNED_BY_HIGHER_GENERATION": OwnedByHigherGenerationError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "TOO_LARGE": InvalidArgumentError,
    "REQUEST_ID_REUSED": InvalidArgumentError,
    "COMPACTED": CompactedError,
    "FUTURE_REVISION": FutureRevisionError,
    "PRODUCER_FENCED": ProducerFencedError,
    "READ_ONLY": ReadOnlyError,
    "NO_QUORUM": NoQuorumError,
    "NO_LEADER": UnavailableError,
    "PROPOSAL_LOST": UnavailableError,
    "UNAVAILABLE": UnavailableError,
    "STOPPED": UnavailableError,
    "NOT_LEADER": UnavailableError,
    "NOT_CONNECTED": UnavailableError,
    "TIMEOUT": DeadlineError,
}

_BY_CODE: dict[grpc.StatusCode, type[CoordError]] = {
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
}


def error_for(
    reason: str,
    message: str = "",
    code: grpc.StatusCode | None = None,
    metadata: Mapping[str, str] | None = None,
) -> CoordError:
    """The typed error for `reason` (falling back to `code`), for errors that arrive
    outside a status (e.g. LeasePidResponse.error) or that the client itself detects."""
    cls = _BY_REASON.get(reason) or (_BY_CODE.get(code) if code is not None else None)
    return (cls or CoordError)(reason, message, code, metadata)


def from_api_error(e: ApiError) -> CoordError:
    """The typed error of a failure as the wire carries it: by its ErrorInfo reason, else
    by its status code."""
    return error_for(e.reason or e.code.name, e.message, e.code, e.metadata)


def from_rpc_error(e: grpc.RpcError) -> CoordError:
    """Map a failed call to a typed error (`from_api_error`)."""
    err = from_api_error(ApiError.of_rpc_error(e))
    err.__cause__ = e
    return err


def _int(v: str | None) -> int:
    try:
        return int(v) if v is not None else 0
    except ValueError:
        return 0
