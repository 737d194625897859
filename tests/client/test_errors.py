"""A failed call's typed error (coord.client.errors): by coord's reason when the status
carries one, else by the status code, and never an error of its own on a status that
does not parse."""

from __future__ import annotations

import grpc
import pytest

from coord.client import (
    CompactedError,
    CoordError,
    DeadlineError,
    InvalidArgumentError,
    NoQuorumError,
    OwnedByHigherGenerationError,
    ProducerFencedError,
    ReadOnlyError,
    SessionGoneError,
    UnavailableError,
    from_rpc_error,
)
from coord.client.errors import FutureRevisionError
from tests.client.fakes import FakeRpcError, S, rpc_error, status_of


@pytest.mark.parametrize(
    "code,reason,cls",
    [
        (S.NOT_FOUND, "UNKNOWN_SESSION", SessionGoneError),
        (S.FAILED_PRECONDITION, "OWNED_BY_HIGHER_GENERATION", OwnedByHigherGenerationError),
        (S.INVALID_ARGUMENT, "INVALID_ARGUMENT", InvalidArgumentError),
        (S.INVALID_ARGUMENT, "TOO_LARGE", InvalidArgumentError),
        (S.OUT_OF_RANGE, "COMPACTED", CompactedError),
        (S.OUT_OF_RANGE, "FUTURE_REVISION", FutureRevisionError),
        (S.FAILED_PRECONDITION, "PRODUCER_FENCED", ProducerFencedError),
        (S.UNAVAILABLE, "NO_LEADER", UnavailableError),
        (S.UNAVAILABLE, "PROPOSAL_LOST", UnavailableError),
        (S.UNAVAILABLE, "UNAVAILABLE", UnavailableError),
        (S.UNAVAILABLE, "NO_QUORUM", NoQuorumError),
        (S.DEADLINE_EXCEEDED, "TIMEOUT", DeadlineError),
        (S.FAILED_PRECONDITION, "READ_ONLY", ReadOnlyError),
    ],
)
def test_error_mapping_by_reason(code, reason, cls):
    err = from_rpc_error(rpc_error(code, reason, "it failed"))
    assert type(err) is cls
    assert err.reason == reason
    assert err.code == code
    assert err.message == "it failed"
    assert isinstance(err.__cause__, grpc.RpcError)


def test_error_mapping_retryable_flags():
    assert from_rpc_error(rpc_error(S.UNAVAILABLE, "NO_QUORUM")).retryable
    assert from_rpc_error(rpc_error(S.UNAVAILABLE, "NO_LEADER")).retryable
    assert not from_rpc_error(rpc_error(S.FAILED_PRECONDITION, "READ_ONLY")).retryable
    assert not from_rpc_error(rpc_error(S.NOT_FOUND, "UNKNOWN_SESSION")).retryable


def test_error_mapping_owned_by_higher_generation_metadata():
    err = from_rpc_error(rpc_error(
        S.FAILED_PRECONDITION, "OWNED_BY_HIGHER_GENERATION", "held",
        {"resource": "p3", "owner": "42", "generation": "7"}))
    assert isinstance(err, OwnedByHigherGenerationError)
    assert (err.resource, err.owner, err.generation) == ("p3", 42, 7)
    assert err.metadata["resource"] == "p3"


@pytest.mark.parametrize(
    "code,cls",
    [
        (S.UNAVAILABLE, UnavailableError),
        (S.DEADLINE_EXCEEDED, DeadlineError),
        (S.INVALID_ARGUMENT, InvalidArgumentError),
        (S.NOT_FOUND, CoordError),
        (S.INTERNAL, CoordError),
    ],
)
def test_error_mapping_falls_back_to_status_code(code, cls):
    err = from_rpc_error(rpc_error(code, None, "failed to connect to all addresses"))
    assert type(err) is cls
    assert err.reason == code.name


def test_error_mapping_unknown_reason_uses_code():
    err = from_rpc_error(rpc_error(S.UNAVAILABLE, "SOMETHING_NEW"))
    assert type(err) is UnavailableError and err.reason == "SOMETHING_NEW"


def test_error_mapping_survives_inconsistent_status():
    # The details message differs from the Status proto's: rpc_status refuses it.
    st = status_of(S.NOT_FOUND, "UNKNOWN_SESSION", "one message")
    e = FakeRpcError(st)
    e.details = lambda: "another message"  # type: ignore[method-assign]
    err = from_rpc_error(e)
    assert type(err) is CoordError and err.reason == "NOT_FOUND"


def test_error_mapping_plain_rpc_error():
    err = from_rpc_error(grpc.RpcError())
    assert type(err) is CoordError and err.reason == "UNKNOWN"
