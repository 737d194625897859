"""The pipelined stream, client side (coord.client.aio_pipeline): what an operation in
flight raises when its stream fails."""

from __future__ import annotations

from coord.client import UnavailableError
from coord.client.aio_pipeline import _stream_error
from coord.client.transport import CallEnded, TransportClosed
from tests.client.fakes import S, rpc_error


def test_a_stream_that_fails_fails_its_operations_retryably():
    """What an operation in flight raises when its pipelined stream fails: the stream's
    status mapped as a unary call's, except that a cancellation we did not ask for (a
    member ending its streams) or gRPC's INTERNAL (a member killed mid-stream) is
    UNAVAILABLE — go to the next member — and a closed client stays closed."""
    cancelled = _stream_error(rpc_error(S.CANCELLED, None, "cancelled by the member"))
    assert isinstance(cancelled, UnavailableError) and cancelled.reason == "UNAVAILABLE"
    # A member killed mid-stream: gRPC's core ends the stream with INTERNAL.
    killed = _stream_error(rpc_error(S.INTERNAL, None, "Internal error from Core"))
    assert isinstance(killed, UnavailableError) and "INTERNAL" in killed.message
    # coord's own INTERNAL carries its reason: the member's answer, passed on as it is.
    answered = _stream_error(rpc_error(S.INTERNAL, "EXPORT_FAILED", "disk gone"))
    assert answered.code == S.INTERNAL and answered.reason == "EXPORT_FAILED"
    down = _stream_error(rpc_error(S.UNAVAILABLE, "NO_LEADER", "no leader"))
    assert isinstance(down, UnavailableError) and down.reason == "NO_LEADER"
    assert isinstance(_stream_error(CallEnded()), UnavailableError)
    assert isinstance(_stream_error(TransportClosed()), TransportClosed)
