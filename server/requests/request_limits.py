"""What a member lets one client request be: etcd's `--max-request-bytes` and
`--max-txn-ops`, judged on the member that receives the request, before anything is
proposed. A member's flags never reach apply: members started with different values
judge the same log entry the same way, because apply holds only the fixed ceilings of
`coord.sm.limits` (one refused by a flag here never becomes an entry).

`--max-concurrent-streams` (HTTP/2 streams per client connection) and the gRPC size
limit derived from `--max-request-bytes` are enforced by gRPC itself
(`server.transport.grpc_options.client_server_options`)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from coord.sm import limits
from coord.sm.errors import TOO_LARGE
from coord.wire import ApiError

DEFAULT_MAX_REQUEST_BYTES = 1536 * 1024
"""etcd's default --max-request-bytes (1.5 MiB)."""

DEFAULT_MAX_CONCURRENT_STREAMS = 1000
"""HTTP/2 streams one client connection may hold open at once (etcd's default is 2^32-1,
no limit): every open stream holds the server's buffers and a handler, so the limit
bounds what one connection can make the member hold. gRPC clients queue a call past it
until a stream of theirs ends; a raw HTTP/2 client that ignores the setting has the extra
stream refused (RST_STREAM REFUSED_STREAM)."""


@dataclass(frozen=True, slots=True)
class RequestLimits:
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_txn_ops: int = limits.DEFAULT_MAX_TXN_OPS
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1:
            raise ValueError("--max-request-bytes must be positive")
        if not 1 <= self.max_txn_ops <= limits.MAX_TXN_OPS:
            raise ValueError(f"--max-txn-ops must be within [1, {limits.MAX_TXN_OPS}] (the most "
                             "operations a transaction may hold on any member)")
        if self.max_concurrent_streams < 1:
            raise ValueError("--max-concurrent-streams must be positive")

    def check_request_bytes(self, size: int) -> None:
        """Refuse a client's write whose request is `size` bytes, over --max-request-bytes:
        etcd refuses a proposal whose marshalled request is over it ("request is too
        large"). The request, not coord's command: a txn's command is JSON, its values
        base64, a third larger than what etcd would have measured."""
        if size > self.max_request_bytes:
            raise over_limit("max-request-bytes", self.max_request_bytes,
                             f"request is too large: {size} bytes")

    def check_txn_ops(self, ops: int) -> None:
        """Refuse a transaction whose longest list (compares, success or failure) holds
        more than --max-txn-ops operations (etcd's checkTxnRequest)."""
        if ops > self.max_txn_ops:
            raise over_limit("max-txn-ops", self.max_txn_ops,
                             f"too many operations in txn request: {ops}")


def over_limit(flag: str, limit: int, what: str) -> ApiError:
    """A refusal that names the limit: ErrorInfo reason TOO_LARGE (INVALID_ARGUMENT), with
    the flag and its value in the metadata."""
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, TOO_LARGE,
                    f"{what}; the limit is --{flag} {limit}",
                    {"limit": flag, "max": str(limit)})
