"""Read-only service, client side: saying the client accepts it, and leaving it.

A client made with `read_only_ok` sends `coord-read-only-ok: 1` with every call
(ZooKeeper's "am-i-readonly-client"), so a member cut off from its quorum keeps
answering its reads, flagged `header.read_only`. The moment such an answer (or a
READ_ONLY refusal, or a read-only keepalive) arrives, the client's `Prober` looks for a
read-write member in the background — `Admin.Status` of every endpoint, current one
first, pauses doubling from 0.1 s to 2 s — moves the client there, and tells the mode
listeners (sessions among them: they say `mode_changed` and move their streams).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from coord.client.endpoints import EndpointRing
from coord.client.errors import CoordError
from coord.client.transport import CallCancelled, TransportClosed, Transports
from coord.v1 import admin_pb2

__all__ = [
    "PROBE_FIRST_PAUSE",
    "PROBE_MAX_PAUSE",
    "PROBE_TIMEOUT",
    "READ_ONLY_OK_METADATA",
    "READ_WRITE",
    "ModeChange",
    "ModeListener",
    "Prober",
    "is_read_write",
    "probe_order",
    "probe_pause",
    "status_of",
]

log = logging.getLogger("coord.client")

READ_ONLY_OK_METADATA: tuple[tuple[str, str], ...] = (("coord-read-only-ok", "1"),)
"""Sent with every call of a client that accepts read-only service (ZooKeeper's
"am-i-readonly-client" flag); sessions also carry it from OpenSession."""

PROBE_FIRST_PAUSE = 0.1
PROBE_MAX_PAUSE = 2.0  # ZooKeeper's client backs off to 60 s; a few seconds is enough
PROBE_TIMEOUT = 0.5
READ_WRITE = "read-write"
STATUS_REQUEST = admin_pb2.StatusRequest()


@dataclass(frozen=True, slots=True)
class ModeChange:
    """The client moved to (or found again) a read-write member."""

    mode: str
    member: str
    endpoint: str
    moved: bool = False  # the client switched members (streams must follow)


ModeListener = Callable[[ModeChange], Any]


def probe_pause(round_: int) -> float:
    return min(PROBE_MAX_PAUSE, PROBE_FIRST_PAUSE * 2**min(round_, 16))


def probe_order(ring: EndpointRing) -> list[int]:
    """The current member first (it may be back already), then the others in ring order."""
    index, _ = ring.current()
    n = len(ring)
    return [(index + k) % n for k in range(n)]


def is_read_write(status: admin_pb2.StatusResponse) -> bool:
    return status.mode == READ_WRITE if status.mode else status.has_quorum


async def status_of(transports: Transports, endpoint: str) -> admin_pb2.StatusResponse | None:
    """The member's `Admin.Status`, or None if it did not answer within PROBE_TIMEOUT."""
    try:
        return await transports.get(endpoint).unary(
            "Admin", "Status", STATUS_REQUEST, timeout=PROBE_TIMEOUT, metadata=())
    except (grpc.RpcError, CoordError, CallCancelled, TransportClosed):
        return None


class Prober:
    """The background search for a read-write member, as one asyncio task at a time; it
    ends once a read-write member is current, and for good at `stop()`."""

    def __init__(self, ring: EndpointRing, transports: Transports,
                 listeners: Sequence[ModeListener]) -> None:
        self._ring = ring
        self._transports = transports
        self._listeners = listeners
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def kick(self) -> None:
        """Start searching unless a search is under way (call on the client's loop)."""
        if self._stopped or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="coord-probe")

    def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        round_ = 0
        while not self._stopped:
            await asyncio.sleep(probe_pause(round_))
            round_ += 1
            found = await self._probe()
            if found is not None:
                self._move(*found)
                return

    async def _probe(self) -> tuple[int, str] | None:
        """(ring index, member name) of a read-write member, current one first."""
        for index in probe_order(self._ring):
            status = await status_of(self._transports, self._ring.endpoints[index])
            if status is not None and is_read_write(status):
                return index, status.name
        return None

    def _move(self, index: int, member: str) -> None:
        """Make read-write `member` at ring `index` current and tell the listeners."""
        endpoint = self._ring.endpoints[index]
        moved = self._ring.move_to(index)
        if moved:
            log.info("coord: moved to read-write member %s (%s)", member, endpoint)
        change = ModeChange(READ_WRITE, member, endpoint, moved)
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a listener's bug must not stop the others
                log.exception("coord: mode listener failed")
