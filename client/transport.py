"""How the client reaches one member: the transport contract, and one transport per
endpoint.

The client's logic (failover, retries, resumable streams, sessions, the read-only prober)
is written once, in `AsyncClient`, against this small contract. Two transports meet it:
`aio_transport` on grpc.aio, for asyncio applications, and `thread_transport` on gRPC's
threaded stack, which the sync `Client` uses under its event-loop thread (see that
module for why). The contract also evens out how each stack reports a call cancelled
or ended under us, so the logic above reads one set of exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSet, Sequence
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from coord.client.calls import Call
from coord.client.endpoints import EndpointRing
from coord.client.errors import CoordError, error_for
from coord.client.retry import RetryPolicy
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.v1 import admin_pb2_grpc, history_pb2_grpc
from coord.v1 import coord_pb2_grpc as pb_grpc

__all__ = [
    "CHANNEL_OPTIONS",
    "BidiCall",
    "CallCancelled",
    "CallEnded",
    "ClientLink",
    "Connect",
    "StreamCall",
    "Stubs",
    "Transport",
    "TransportClosed",
    "Transports",
    "closed_error",
]

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    # gRPC's own reconnect backoff defaults to 1 s .. 120 s: a member that was down would
    # stay unreachable long after it is back. Keep it within our own backoff.
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Ranges and txns may carry many 1 MiB values (the default limit is 4 MiB).
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
]

Metadata = Sequence[tuple[str, str]]
T = TypeVar("T")


class CallCancelled(Exception):
    """The call was cancelled on this side (by `cancel()`, or by closing its transport)
    while our own task was not: the caller decides whether to reopen it."""


class CallEnded(Exception):
    """A write to a stream the server already ended."""


class TransportClosed(Exception):
    """The transport was closed (the client is closing)."""


class StreamCall(Protocol):
    """A server-streaming call. Every method runs on the client's event loop."""

    async def read(self) -> Any | None:
        """The next message; None once the server ended the stream. Raises grpc.RpcError
        if the call failed, CallCancelled after `cancel()`."""

    def cancel(self) -> None:
        """End the call; a pending or later `read()` raises CallCancelled."""


class BidiCall(StreamCall, Protocol):
    """A bidirectional streaming call."""

    async def write(self, request: Message) -> None:
        """Send one request; CallEnded if the call is over, CallCancelled if cancelled."""

    async def started(self) -> None:
        """Return once the member accepted the call or ended it: write after this (a
        write racing a refusal may hide the refusal's status)."""


class Transport(Protocol):
    """One member's connection. Created lazily on the client's event loop."""

    async def unary(self, service: str, method: str, request: Message, *, timeout: float,
                    metadata: Metadata) -> Any:
        """One request, one answer. Raises grpc.RpcError, TransportClosed, or
        CallCancelled if the call was cut off under us."""

    def server_stream(self, service: str, method: str, request: Message, *,
                      metadata: Metadata) -> StreamCall: ...

    def bidi_stream(self, service: str, method: str, *, metadata: Metadata) -> BidiCall: ...

    async def wait_ready(self, timeout: float) -> bool:
        """Whether the connection became ready within `timeout` seconds."""

    async def close(self) -> None:
        """Cancel every call and close the connection."""


Connect = Callable[[str, grpc.ChannelCredentials | None], Transport]
"""Makes the transport for an endpoint, with TLS given credentials (called on the
client's event loop)."""


class Stubs:
    """The service stubs on one channel (grpc.aio or threaded alike)."""

    def __init__(self, channel: grpc.Channel | grpc.aio.Channel) -> None:
        self.Sessions = pb_grpc.SessionsStub(channel)
        self.Ownership = pb_grpc.OwnershipStub(channel)
        self.Producers = pb_grpc.ProducersStub(channel)
        self.KV = pb_grpc.KVStub(channel)
        self.Pipeline = pb_grpc.PipelineStub(channel)
        self.Admin = admin_pb2_grpc.AdminStub(channel)
        self.History = history_pb2_grpc.HistoryStub(channel)
        self.Auth = etcd_grpc.AuthStub(channel)  # etcd's: the login both APIs share

    def method(self, service: str, method: str) -> Any:
        return getattr(getattr(self, service), method)


def closed_error() -> CoordError:
    return error_for("CLOSED", "the client is closed", grpc.StatusCode.CANCELLED)


class Transports:
    """One transport per endpoint, made on first use and kept while the client lives (a
    member that failed is tried again on the same connection; gRPC reconnects it)."""

    def __init__(self, connect: Connect,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._connect = connect
        self._credentials = credentials
        self._by_endpoint: dict[str, Transport] = {}
        self.closed = False

    def get(self, endpoint: str) -> Transport:
        """The endpoint's transport; CoordError CLOSED once the client is closed."""
        if self.closed:
            raise closed_error()
        transport = self._by_endpoint.get(endpoint)
        if transport is None:
            transport = self._by_endpoint[endpoint] = self._connect(endpoint,
                                                                   self._credentials)
        return transport

    async def close(self) -> None:
        self.closed = True
        transports = list(self._by_endpoint.values())
        self._by_endpoint.clear()
        for transport in transports:
            await transport.close()


class ClientLink(Protocol):
    """What a stream or a session needs of its client (`AsyncClient` meets it): so those
    modules need not import the client module, which imports them."""

    ring: EndpointRing
    policy: RetryPolicy
    metadata: Metadata
    mode_listeners: list[Callable[[Any], Any]]
    sessions: MutableSet[Any]

    def current(self) -> tuple[int, Transport]:
        """(ring index, transport) of the current endpoint; CoordError CLOSED if closed."""

    async def send(self, call: Call[T]) -> T:
        """One request with failover (`AsyncClient.send`)."""

    def saw_read_only(self, member: str = "", term: int = 0, revision: int = 0) -> None:
        """A member answered read-only: tell the sessions, look for a read-write one."""
