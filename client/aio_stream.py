"""`AsyncStream`: a server stream (a KV watch, an owners watch) that outlives the member
serving it.

On a failure it reopens itself on the next member from its cursor's position, so the
consumer sees every item once, in order, across failovers; consecutive failures are
bounded by the client's retry policy. `cancel()` ends it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Generic, TypeVar

import grpc

from coord.client.calls import header_facts, served_read_only
from coord.client.cursors import Cursor
from coord.client.errors import CoordError, error_for, from_rpc_error
from coord.client.transport import (
    CallCancelled,
    ClientLink,
    StreamCall,
    TransportClosed,
    closed_error,
)

__all__ = ["AsyncStream"]

log = logging.getLogger("coord.client")

T = TypeVar("T")


class AsyncStream(Generic[T]):
    """An async iterator over a server stream that reopens itself on the next member
    after a failure (bounded consecutive failures); `cancel()` ends it."""

    def __init__(self, client: ClientLink, cursor: Cursor[T]) -> None:
        self._client = client
        self._cursor = cursor
        self._call: StreamCall | None = None
        self._index = 0
        self._pending: collections.deque[T] = collections.deque()
        self._failures = 0
        self._cancelled = False

    def __aiter__(self) -> AsyncStream[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._cancelled:
                raise StopAsyncIteration
            try:
                if self._call is None:
                    await self._open()
                assert self._call is not None
                response = await self._call.read()
            except CallCancelled:
                self._call = None
                if self._cancelled:
                    raise StopAsyncIteration from None
                await self._failed(error_for("CANCELLED", "stream cancelled",
                                             grpc.StatusCode.CANCELLED))
                continue
            except grpc.RpcError as e:
                self._call = None
                if self._cancelled:
                    raise StopAsyncIteration from None
                await self._failed(from_rpc_error(e))
                continue
            except CoordError:  # the start read failed (it retried already), or closed
                self._call = None
                if self._cancelled:
                    raise StopAsyncIteration from None
                raise
            except TransportClosed:
                self._call = None
                raise closed_error() from None
            if response is None:  # the server ended the stream without a reason
                self._call = None
                await self._failed(error_for("STREAM_ENDED", "the server ended the stream",
                                             grpc.StatusCode.UNAVAILABLE))
                continue
            self._failures = 0
            if served_read_only(response):
                self._client.saw_read_only(*header_facts(response.header))
            try:
                self._pending.extend(self._cursor.feed(response))
            except CoordError:
                self.cancel()
                raise

    async def _pin(self) -> None:
        """Resolve where the stream starts (a watch "from now": the current revision + 1)."""
        start = self._cursor.start_call()
        if start is not None:
            self._cursor.started(await self._client.send(start))

    async def _open(self) -> None:
        await self._pin()
        self._index, transport = self._client.current()
        metadata = await self._client.call_metadata(transport, self._client.timeout)
        self._call = transport.server_stream(
            self._cursor.service, self._cursor.method, self._cursor.request(),
            metadata=metadata)
        if self._cancelled:  # cancelled while pinning
            self._call.cancel()

    async def _failed(self, err: CoordError) -> None:
        if not self._cursor.on_error(err) and not self._client.token_expired(err):
            raise err
        self._failures += 1
        if self._failures >= self._client.policy.attempts(len(self._client.ring)):
            raise err
        log.debug("stream %s.%s failed (%s); reopening on the next member",
                  self._cursor.service, self._cursor.method, err.reason)
        self._client.ring.failed(self._index)
        await asyncio.sleep(self._client.policy.delay(self._failures, len(self._client.ring)))

    def cancel(self) -> None:
        """Stop the stream; a pending `__anext__` ends with StopAsyncIteration."""
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()

    async def aclose(self) -> None:
        self.cancel()

    async def __aenter__(self) -> AsyncStream[T]:
        """Entering starts the watch: "from now" means from here, so changes made in the
        block before the first read are delivered too (the stream opens lazily)."""
        await self._pin()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()
