"""gRPC options of the member's servers and of its calls to peers (the Forward service),
and which of the servers' methods are registered with gRPC (`Registrar`).

Raft traffic does not use gRPC (`coord.server.transport.peer`); requests a follower
forwards to its leader do, over the peer port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

from coord.server.transport.peer import MAX_MESSAGE_BYTES

__all__ = ["CHANNEL_OPTIONS", "EXCLUSIVE_BIND", "SERVER_OPTIONS", "HandlerWrap", "Registrar",
           "client_server_options"]

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

PEER_MAX_CONCURRENT_STREAMS = 100
"""Streams one connection to the peer gRPC server may hold open: a follower holds one
forwarding stream and a few keepalive calls. Before its handler authenticates a call,
gRPC has taken the call's message; this bounds how many of them one connection can make
the member hold."""

SERVER_OPTIONS: list[tuple[str, int]] = [
    EXCLUSIVE_BIND,
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_concurrent_streams", PEER_MAX_CONCURRENT_STREAMS),
    *_KEEPALIVE_OPTIONS,
    # Accept the peers' keepalive pings (every 2 s, also without calls) without GOAWAY.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
]
"""Options of the member's peer gRPC server (``grpc.aio.server(options=...)``)."""

GRPC_OVERHEAD_BYTES = 512 * 1024
"""etcd's allowance for gRPC's framing on top of --max-request-bytes: a client message
larger than the two together is refused by gRPC itself (RESOURCE_EXHAUSTED, "received
message larger than max")."""


def client_server_options(max_request_bytes: int,
                          max_concurrent_streams: int) -> list[tuple[str, int]]:
    """Options of the member's client gRPC server, from its --max-request-bytes and
    --max-concurrent-streams (as etcd sets its own)."""
    return [
        EXCLUSIVE_BIND,
        ("grpc.max_receive_message_length", max_request_bytes + GRPC_OVERHEAD_BYTES),
        ("grpc.max_concurrent_streams", max_concurrent_streams),
    ]


class Registrar:
    """What a member's services are added to (`add_*Servicer_to_server(servicer, ...)`),
    in place of the gRPC server: every method is served through its service's generic
    handler, and only the methods named in `registered` (full names,
    "/package.Service/Method") keep the "registered method" copy that generated code also
    adds.

    How grpcio's asyncio server takes calls: it keeps one pending request per registered
    method and one for all the rest, admits a call each time one of them completes,
    waiting on all of them at once (asyncio.wait, a cost per call that grows with their
    number: 59 with every method of the client port registered), and re-arms it a few
    loop turns later. Under load calls queue in gRPC for that: from 64 clients' etcd
    puts a call waited 14.2-15.5 ms between arriving and its handler starting, of a p50
    of 21.6 ms (a temporary timing build; README, "Where a unary call waits"). So a
    method with a request of its own is admitted alongside the others, and every call
    pays for each pending request (about seven Python calls each, per call admitted).
    Registered: the few methods called once per operation by clients that send many (the
    etcd API's reads and writes; coord's own clients use one stream per connection); the
    rest are served generically. Measured when the choice was between whole services,
    `coord bench etcd`'s driver, 2 alternated pairs of 6 s at 64 clients, every service
    registered / none / etcd KV and Lease only: puts
    2,851-2,862 / 3,071-3,224 / 2,836-3,243 per s; gets 5,182-5,910 / 5,672-6,364 /
    6,039-6,221; half puts and half gets 3,888-4,106 / 3,238-3,307 / 3,795-4,212. The
    four methods registered now (KV's Range, Put, DeleteRange and Txn) against KV and
    Lease, 2 alternated pairs on 3 members at 64 clients: etcd-API puts at 0.35-0.36 of
    the floor's rate against 0.25-0.33, half puts and half gets 1,079-1,138 per s against
    941-1,101; and 425 Python calls per lone put on a single member against 479.

    `wrap` (the member's metrics, when on): every method is served through
    `wrap(method, handler)`, made once per method when it is registered or first called,
    so nothing is added per call but what the wrapper itself does."""

    def __init__(self, server: grpc.aio.Server, registered: Sequence[str] = (),
                 wrap: HandlerWrap | None = None) -> None:
        self.server = server
        self.registered = frozenset(registered)
        self.wrap = wrap
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        if self.wrap is not None:
            handlers = [_WrappedGeneric(h, self._wrapped_handler) for h in handlers]
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        """Registered only for the methods in `registered`; every other is served by the
        generic handler added with these."""
        kept = {name: h for name, h in handlers.items()
                if f"/{service}/{name}" in self.registered}
        if kept:
            if self.wrap is not None:
                kept = {name: self._wrapped_handler(f"/{service}/{name}", h)
                        for name, h in kept.items()}
            self.server.add_registered_method_handlers(service, kept)

    def _wrapped_handler(self, method: str, handler: grpc.RpcMethodHandler
                         ) -> grpc.RpcMethodHandler:
        """`wrap(method, handler)`, made once per method: a registered method and the
        generic path to it share one wrapper."""
        assert self.wrap is not None
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            wrapped = self._wrapped[method] = self.wrap(method, handler)
        return wrapped


HandlerWrap = Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]
"""(full method name "/package.Service/Method", its handler) -> the handler to serve."""


class _WrappedGeneric(grpc.GenericRpcHandler):
    """A service's generic handler whose method handlers are wrapped (once each)."""

    def __init__(self, inner: grpc.GenericRpcHandler,
                 wrapped: Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]) -> None:
        self._inner = inner
        self._wrapped = wrapped

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        return self._wrapped(handler_call_details.method, handler)
