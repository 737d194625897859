"""Which members a client talks to: the endpoint list and the current endpoint.

Every call, stream, keepalive and probe of one client shares one `EndpointRing`, so a
member found down is skipped by all of them at once instead of each rediscovering it.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Sequence

__all__ = ["DEFAULT_ENDPOINTS", "ENDPOINTS_ENV", "EndpointRing", "parse_endpoints"]

DEFAULT_ENDPOINTS: tuple[str, ...] = ("127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103")
"""Where `coord dev` listens by default."""
ENDPOINTS_ENV = "COORD_ENDPOINTS"


def parse_endpoints(endpoints: Sequence[str] | str | None = None) -> list[str]:
    """A de-duplicated endpoint list from a list or a comma-separated string; None means
    $COORD_ENDPOINTS, else the `coord dev` defaults."""
    if endpoints is None:
        endpoints = os.environ.get(ENDPOINTS_ENV) or ",".join(DEFAULT_ENDPOINTS)
    items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    if not out:
        raise ValueError("no endpoints given")
    return out


class EndpointRing:
    """The current endpoint, shared by every call, stream and keepalive of one client so
    that a member found down is skipped by all of them. `failed(i)` moves on only if `i`
    is still current: concurrent failures against one member rotate once, not N times.
    Locked: the sync client's callers read it from their own threads.

    `randomize`: start at a random endpoint rather than the first, so that many clients
    given the same list spread over the members instead of all landing on the first
    (ZooKeeper's clients shuffle their connect string; kazoo's `randomize_hosts`). The
    order of failover after it stays the list's."""

    def __init__(self, endpoints: Sequence[str], randomize: bool = False) -> None:
        if not endpoints:
            raise ValueError("no endpoints given")
        self.endpoints: tuple[str, ...] = tuple(endpoints)
        self._index = random.randrange(len(self.endpoints)) if randomize else 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.endpoints)

    def current(self) -> tuple[int, str]:
        with self._lock:
            return self._index, self.endpoints[self._index]

    def failed(self, index: int) -> None:
        with self._lock:
            if index == self._index:
                self._index = (index + 1) % len(self.endpoints)

    def move_to(self, index: int) -> bool:
        """Make `index` current (the prober found a read-write member); True if it moved."""
        with self._lock:
            moved, self._index = self._index != index, index
            return moved
