"""gRPC options of the member's servers and of its calls to peers (the Forward service).

Raft traffic does not use gRPC (`coord.server.transport.peer`); requests a follower
forwards to its leader do, over the peer port.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from coord.server.transport.peer import MAX_MESSAGE_BYTES

__all__ = ["CHANNEL_OPTIONS", "EXCLUSIVE_BIND", "SERVER_OPTIONS", "GenericOnly"]

BACKOFF_MIN_MS = 50
BACKOFF_MAX_MS = 1000

_KEEPALIVE_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 1000),
    # With grpcio 1.85 an unanswered keepalive ping fails the connection only after this
    # (default 1 min), whatever keepalive_timeout_ms says.
    ("grpc.http2.ping_timeout_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Keep pinging an idle stream (the default stops after 2 pings without data).
    ("grpc.http2.max_pings_without_data", 0),
]

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    *_KEEPALIVE_OPTIONS,
    # gRPC's own reconnect backoff defaults to 1 s .. 120 s; keep it within ours.
    ("grpc.initial_reconnect_backoff_ms", BACKOFF_MIN_MS),
    ("grpc.min_reconnect_backoff_ms", BACKOFF_MIN_MS),
    ("grpc.max_reconnect_backoff_ms", BACKOFF_MAX_MS),
    ("grpc.enable_retries", 0),
    # One connection per peer channel, closed with it (not shared process-wide).
    ("grpc.use_local_subchannel_pool", 1),
]
"""Options of a member's channel to a peer."""

EXCLUSIVE_BIND = ("grpc.so_reuseport", 0)
"""gRPC servers set SO_REUSEPORT by default, so a second server on a port already served
binds without error and the kernel splits connections between the two. Every coord server
binds exclusively: a taken port is a start-up error, not a member answering for another."""

SERVER_OPTIONS: list[tuple[str, int]] = [
    EXCLUSIVE_BIND,
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    *_KEEPALIVE_OPTIONS,
    # Accept the peers' keepalive pings (every 2 s, also without calls) without GOAWAY.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
]
"""Options of the member's peer gRPC server (``grpc.aio.server(options=...)``)."""


class GenericOnly:
    """What a member's services are added to (`add_*Servicer_to_server(servicer, ...)`),
    in place of the gRPC server itself: it serves every method through the service's
    generic handler, and drops the "registered method" copy that generated code adds.

    grpcio's asyncio server keeps one pending request per registered method and, for
    each call it takes, waits on all of them at once (asyncio.wait) and re-arms one: a
    cost per call that grows with the methods served (59 on a member's client port).
    Through generic handlers it waits on one. Measured with `coord bench etcd`'s driver
    (3 pairs, 6 s each, 08:00): linearizable gets from 64 clients 4,632-5,336/s with
    registered methods, 5,657-6,636/s without, the leader's CPU per get 200-218 us
    against 162-178; puts within the noise. The calls served and their answers do not
    change (generated code adds both copies of the same handlers)."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        """Not registered: the generic handler added with them serves these methods."""
