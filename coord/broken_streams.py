"""Which statuses of a pipelined stream say the stream broke, rather than what the far
end answered. A member that stops cancels its streams (CANCELLED, when we did not cancel
it ourselves), and one killed mid-stream leaves gRPC's core to end the stream with
INTERNAL ("Internal error from Core"; coord never sends INTERNAL itself). Both callers of
a stream, the client library's `Pipeline` and a follower's `ProposeStream` to its
leader, report such a break as UNAVAILABLE, so what was in flight on it is retried
elsewhere under its request id instead of reaching the caller as an internal error."""

from __future__ import annotations

import grpc

__all__ = ["BROKEN_STREAM_CODES"]

BROKEN_STREAM_CODES = frozenset({grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL})
