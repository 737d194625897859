"""The transport on grpc.aio, for `AsyncClient` in an asyncio application.

grpc.aio reports a call cancelled under us (by `cancel()`, or by closing its channel) as
`asyncio.CancelledError` in the task that awaits it — the same exception as the task
itself being cancelled. This module tells them apart (the task is not being cancelled:
the call was) and raises `CallCancelled` for the first, so the client's logic never has
to guess.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message

from coord.client.transport import (
    CHANNEL_OPTIONS,
    CallCancelled,
    CallEnded,
    Metadata,
    Stubs,
    TransportClosed,
)
from coord.tls.credentials import aio_channel

__all__ = ["AioTransport", "connect"]


def _task_cancelling() -> bool:
    """Inside `except asyncio.CancelledError`: whether our own task is being cancelled
    (else only the gRPC call was)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


class _AioStream:
    def __init__(self, call: Any) -> None:
        self._call = call

    async def read(self) -> Any | None:
        try:
            message = await self._call.read()
        except asyncio.CancelledError:
            if _task_cancelling():
                raise
            raise CallCancelled from None
        except grpc.aio.UsageError:  # the channel was closed under us
            raise TransportClosed from None
        return None if message is grpc.aio.EOF else message

    async def write(self, request: Message) -> None:
        try:
            await self._call.write(request)
        except asyncio.CancelledError:
            if _task_cancelling():
                raise
            raise CallCancelled from None
        except asyncio.InvalidStateError:
            # write() on a call that already ended (the member went away while we slept)
            # raises this, not an RpcError.
            raise CallEnded from None
        except grpc.aio.UsageError:
            raise TransportClosed from None

    async def started(self) -> None:
        """Once the member accepted the call (its headers arrived) or ended it. Writing
        before then races a refusal (an UNIMPLEMENTED method), and grpc.aio turns the
        refusal into INTERNAL when a write is under way."""
        try:
            await self._call.initial_metadata()
        except (grpc.RpcError, asyncio.CancelledError):
            if _task_cancelling():
                raise
            # whatever ended the call, read() reports it

    def cancel(self) -> None:
        self._call.cancel()


class AioTransport:
    """One grpc.aio channel (TLS with `credentials`); it must be made and used on one
    event loop."""

    def __init__(self, endpoint: str, credentials: grpc.ChannelCredentials | None = None
                 ) -> None:
        self._channel = aio_channel(endpoint, credentials, CHANNEL_OPTIONS)
        self._stubs = Stubs(self._channel)
        self._closed = False

    async def unary(self, service: str, method: str, request: Message, *, timeout: float,
                    metadata: Metadata) -> Any:
        try:
            return await self._stubs.method(service, method)(
                request, timeout=timeout, metadata=metadata)
        except asyncio.CancelledError:
            if _task_cancelling():
                raise
            if self._closed:
                raise TransportClosed from None
            raise CallCancelled from None
        except grpc.aio.UsageError:  # the channel was closed under us
            if self._closed:
                raise TransportClosed from None
            raise

    def server_stream(self, service: str, method: str, request: Message, *,
                      metadata: Metadata) -> _AioStream:
        try:
            return _AioStream(self._stubs.method(service, method)(request, metadata=metadata))
        except grpc.aio.UsageError:
            if self._closed:
                raise TransportClosed from None
            raise

    def bidi_stream(self, service: str, method: str, *, metadata: Metadata) -> _AioStream:
        try:
            return _AioStream(self._stubs.method(service, method)(metadata=metadata))
        except grpc.aio.UsageError:
            if self._closed:
                raise TransportClosed from None
            raise

    async def wait_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self._closed = True
        await self._channel.close()


def connect(endpoint: str, credentials: grpc.ChannelCredentials | None = None
            ) -> AioTransport:
    """The `Connect` of `AsyncClient` by default."""
    return AioTransport(endpoint, credentials)
