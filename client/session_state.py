"""What a live session knows about itself, and how it tells its owner.

`SessionCore` is the liveness bookkeeping of one session (TTL, last acknowledged
keepalive, cluster mode, how it ended), free of I/O and threads so it is tested alone.
`SessionOutput` is where a session's news goes: the asyncio session queues it for
`async for` and calls callbacks on the loop; the sync facade sets a `threading.Event`
and runs callbacks on its own thread, so a slow callback never delays a keepalive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from coord.client.read_only import ModeChange
from coord.client.results import SessionEvent
from coord.v1 import coord_pb2 as pb

__all__ = [
    "GONE",
    "REGISTERED",
    "TERMINAL_EVENTS",
    "SessionCore",
    "SessionFacts",
    "SessionOutput",
    "describe_end",
]

TERMINAL_EVENTS: frozenset[str] = frozenset(
    {"severed", "expired", "released", "closed", "dropped"})
GONE = "gone"
REGISTERED = "registered"


@dataclass
class SessionCore:
    """Liveness bookkeeping of one session (shared by Session and AsyncSession): the TTL
    as last granted, when a keepalive was last acknowledged, the cluster mode, and how the
    session ended. `end()` is true exactly once, so the owner is told exactly once."""

    session_id: int
    ttl: float
    name: str = ""
    clock: Callable[[], float] = time.monotonic
    mode: str = "read-write"
    ended: SessionEvent | None = None
    closing: bool = False  # the client itself is closing it: not a loss to report
    local: bool = False  # member-local: held by one read-only member until `registered`
    _acked_at: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._acked_at = self.clock()

    @property
    def interval(self) -> float:
        """Keepalive period: a third of the TTL, so two lost keepalives are survivable."""
        return max(0.05, self.ttl / 3)

    def request(self) -> pb.KeepAliveRequest:
        return pb.KeepAliveRequest(session_id=self.session_id)

    def acked(self, sent_at: float, response: pb.KeepAliveResponse) -> SessionEvent | None:
        """Record a keepalive answer; the end event if the server says the session is gone.
        The TTL runs from when the acknowledged keepalive was SENT (the conservative end)."""
        if response.gone:
            return self.gone("keepalive: the server reports the session gone")
        if response.local:  # renewed by the member that holds this member-local session
            self._renewed(sent_at, response.ttl_ms)
            return None
        if response.read_only:
            # Answered, not renewed: the TTL keeps running down. The mode is not recorded
            # here: the caller reports the read-only answer to the client, which tells
            # every session at once (`entered_read_only`).
            return None
        if response.pending:
            return None  # the member is alive but no leader renewed it (yet)
        self._renewed(sent_at, response.ttl_ms)
        return None

    def _renewed(self, sent_at: float, ttl_ms: int) -> None:
        if ttl_ms > 0:
            self.ttl = ttl_ms / 1000
        self._acked_at = max(self._acked_at, sent_at)

    def stalled(self, oldest_unacked: float | None) -> bool:
        """A keepalive unanswered for a whole interval: the member is stuck, move on."""
        return oldest_unacked is not None and self.clock() - oldest_unacked > self.interval

    def unanswered_for(self) -> float:
        """Seconds since the last acknowledged keepalive was sent (or the session began)."""
        return self.clock() - self._acked_at

    def remaining(self) -> float:
        """Seconds the session is known to live without another acknowledged keepalive."""
        return max(0.0, self._acked_at + self.ttl - self.clock())

    def gone(self, message: str) -> SessionEvent:
        return SessionEvent(GONE, self.session_id, message=message)

    def entered_read_only(self, member: str, term: int = 0,
                          revision: int = 0) -> SessionEvent | None:
        """An answer from a read-only member reached the client: the mode_changed event
        to deliver, if this session did not know yet (None once it ended)."""
        if self.ended is not None or self.mode == "read-only":
            return None
        return SessionEvent("mode_changed", self.session_id, mode="read-only", member=member,
                            term=term, revision=revision)

    def already_told(self, event: SessionEvent) -> bool:
        """A mode_changed event for the mode this session already reported (the member's
        own event arriving after the client told the session, or a reconnect's "where it
        stands now"): not worth telling twice."""
        return event.type == "mode_changed" and bool(event.mode) and event.mode == self.mode

    def moved(self, change: ModeChange) -> SessionEvent | None:
        """The client found a read-write member: the mode_changed event to deliver, if
        this session did not know yet (None once it ended)."""
        if self.ended is not None or self.mode == change.mode:
            return None
        return SessionEvent("mode_changed", self.session_id, mode=change.mode,
                            member=change.member)

    def observe(self, event: SessionEvent) -> bool:
        """Track the mode; True if `event` ends the session."""
        if event.type == "mode_changed" and event.mode:
            self.mode = event.mode
        elif event.type == REGISTERED:
            self.local = False
        return event.type in TERMINAL_EVENTS

    def end(self, event: SessionEvent) -> bool:
        """Record the end; True only the first time."""
        with self._lock:
            if self.ended is not None:
                return False
            self.ended = event
            return True

    @property
    def report_loss(self) -> bool:
        """Whether an end should reach on_severed: not when the client closed it itself."""
        return not self.closing


def describe_end(event: SessionEvent) -> str:
    """One line on why a session ended (for logs and the CLI)."""
    if event.type == "severed":
        return (f"session {event.session_id} severed: session {event.new_owner} claimed "
                f"{event.group}/{event.resource} at generation {event.generation}")
    if event.type == GONE:
        return f"session {event.session_id} is gone ({event.message or 'ended'})"
    if event.type == "dropped":
        return f"session {event.session_id} dropped: {event.message}"
    return f"session {event.session_id} {event.type}"


class SessionOutput(Protocol):
    """Where a session's news goes (see the module docstring). Called on the client's
    event loop, in this order for the end: `fence()`, then `finish()`."""

    def fence(self) -> None:
        """The session is over: fence its owner now, before any callback runs."""

    def deliver(self, event: SessionEvent, notify: bool) -> None:
        """Queue `event` for `events()` readers; `notify`: also call `on_event` (events the
        client made up, such as `gone`, are queued without it)."""

    def finish(self, event: SessionEvent, report: bool) -> None:
        """Last: call `on_severed(event)` if `report` (the client did not end the session
        itself), then end every `events()` reader — only after the callback ran."""


class _Fence(Protocol):
    def is_set(self) -> bool: ...


class SessionFacts:
    """What a live session says about itself, read from its core: the same for the
    asyncio session and the sync facade's (whose `fenced` is a threading.Event)."""

    core: SessionCore
    fenced: _Fence

    @property
    def id(self) -> int:
        return self.core.session_id

    @property
    def ttl(self) -> float:
        return self.core.ttl

    @property
    def ended(self) -> SessionEvent | None:
        """How the session ended, or None while it is live."""
        return self.core.ended

    @property
    def local(self) -> bool:
        """Member-local: opened by a read-only member, held there alone (nothing about it
        replicated) until that member rejoins a majority and registers it (`registered`)
        or ends it (`dropped`, saying why). Writes bound to it are refused meanwhile."""
        return self.core.local

    @property
    def mode(self) -> str:
        """read-write, or read-only while the cluster has no quorum (mode_changed)."""
        return self.core.mode

    def remaining(self) -> float:
        """Seconds the session is known to stay alive even if no keepalive gets through."""
        return 0.0 if self.fenced.is_set() else self.core.remaining()
