"""`Client`'s sessions (`coord.client.sync`): a blocking facade over `AsyncSession`."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from coord.client.aio_session import AsyncSession
from coord.client.calls import ClaimLike
from coord.client.errors import CoordError
from coord.client.keys import Bytesish
from coord.client.loop_thread import CallbackThread
from coord.client.results import OwnResult, PutResult, ReleaseResult, SessionEvent
from coord.client.session_state import SessionFacts

if TYPE_CHECKING:
    from coord.client.sync import Client

__all__ = ["Session"]

log = logging.getLogger("coord.client")

SessionCallback = Callable[[SessionEvent], Any]

_END = object()


class _ThreadOutput:
    """A sync Session's news: `fenced` is a threading.Event set on the loop the moment the
    session ends; events go to a queue for `events()`; callbacks run on the client's
    callback thread, and `events()` ends only after `on_severed` ran there."""

    def __init__(self, fenced: threading.Event, events: queue.Queue[Any],
                 on_severed: SessionCallback | None, on_event: SessionCallback | None,
                 callbacks: CallbackThread) -> None:
        self._fenced = fenced
        self._events = events
        self._on_severed = on_severed
        self._on_event = on_event
        self._callbacks = callbacks

    def fence(self) -> None:
        self._fenced.set()

    def deliver(self, event: SessionEvent, notify: bool) -> None:
        self._events.put(event)
        if notify and self._on_event is not None:
            self._callbacks.submit(self._on_event, event, what="session callback")

    def finish(self, event: SessionEvent, report: bool) -> None:
        if self._on_severed is None and self._on_event is None:
            self._events.put(_END)
            return
        on_severed = self._on_severed if report else None
        if not self._callbacks.submit(self._severed, on_severed, event,
                                      what="session callback"):
            self._events.put(_END)  # the client is closed: no callbacks any more

    def _severed(self, on_severed: SessionCallback | None, event: SessionEvent) -> None:
        try:
            if on_severed is not None:
                on_severed(event)
        finally:
            self._events.put(_END)  # last: once events() ends, the callback has run


class Session(SessionFacts):
    """A live session, kept alive in the background (an `AsyncSession` on the client's
    loop: keepalives every ttl/3 on a bidi stream, and the session's events read by
    another stream). Both reconnect to the next member on failure and keep the same
    session id: the session outlives its connections.

    The moment the session is known to be over (a severed/expired/closed event, keepalive
    answering gone, the server not knowing the id) `fenced` is set and `on_severed(event)`
    is called once (on the client's callback thread), so an owner stops writing at once.
    `close()` ends it on the server (instant release) and stops keeping it alive."""

    def __init__(
        self,
        client: Client,
        start: Callable[[_ThreadOutput], Coroutine[Any, Any, AsyncSession]],
        on_severed: SessionCallback | None = None,
        on_event: SessionCallback | None = None,
    ) -> None:
        """`start(output)` gives, on the client's loop, the AsyncSession this one is,
        its tasks not started yet: opened there in the same hop (`Client.session`), or
        attached to an existing id (`Client.attach`)."""
        self.client = client
        self.fenced = threading.Event()
        self._events: queue.Queue[Any] = queue.Queue()
        output = _ThreadOutput(self.fenced, self._events, on_severed, on_event,
                               client._callbacks)
        self._owner = client._aio
        self._aio = client._wait(start(output))
        self.core = self._aio.core
        # Its tasks start now, from here: run as part of the hop above they would keep
        # the loop (and the GIL) busy before the answer reached this thread (~2 ms).
        client._loop.call_soon(self._aio.start)

    # -- conveniences bound to this session ---------------------------------------------
    def own(self, group: str, claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return self.client.own(self, group, claims)

    def release(self, group: str, resources: Iterable[str] | str) -> ReleaseResult:
        return self.client.release(self, group, resources)

    def put(self, key: Bytesish, value: Bytesish, *, prev_kv: bool = False) -> PutResult:
        """A key deleted when this session ends."""
        return self.client.put(key, value, session=self, prev_kv=prev_kv)

    def events(self, timeout: float | None = None) -> Iterator[SessionEvent]:
        """The session's events as they arrive; ends when the session ends (or after
        `timeout` seconds without one)."""
        while True:
            try:
                item = self._events.get(timeout=timeout)
            except queue.Empty:
                return
            if item is _END:
                self._events.put(_END)  # so every other reader ends too
                return
            yield item

    # -- closing ------------------------------------------------------------------------
    def close(self, timeout: float = 2.0) -> None:
        """End the session on the server (everything it holds is released at once) and
        stop keeping it alive. Idempotent; a session already gone closes quietly."""
        self._finish(self._aio.close(timeout))

    def detach(self, timeout: float = 2.0) -> None:
        """Stop keeping the session alive WITHOUT closing it (it expires after its TTL
        unless someone else keeps it alive)."""
        self._finish(self._aio.detach(timeout))

    def _finish(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            self.client._wait_for(self._owner, coro)
        except CoordError as e:
            if e.reason == "CLOSED" and self.client.closed and self.core.ended is not None:
                return  # the client's close ended the session already
            raise

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.close()
        except CoordError:
            if exc_type is None:
                raise
            log.warning("coord: closing session %d failed", self.id, exc_info=True)
