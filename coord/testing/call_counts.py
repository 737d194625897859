"""What a `Client` asks of coord, counted: a figure that does not depend on the machine,
for tests and benchmarks that hold a protocol to its number of round trips.

`counting(client)` wraps one client (nothing else is touched) and counts, until the
block ends:
  - `calls`: the requests it sends, by method (`Own`, `GetOwner`, `OpenSession`, ...):
    each a request on the wire, retries included;
  - `waits`: the times the thread that entered the block waited on the client's loop
    (one per call of the synchronous facade, a few of which send nothing, as a
    session's detach): calls made together in one wait share their round trip, so this
    is how many round trips that thread waits for in a row;
  - `beside`: waits of other threads meanwhile — calls the caller started on threads
    of their own (`coord.spark.overlap`) to overlap its own: one such wait, joined
    after the caller's next wait, adds none in a row;
  - `kept_alive`: sessions opened and kept alive, each of which also opens two streams
    of its own (keepalives, events) beside the calls above.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from coord.client import Client

__all__ = ["CallCounts", "counting"]


@dataclass
class CallCounts:
    calls: Counter[str] = field(default_factory=Counter)
    waits: int = 0
    beside: int = 0
    kept_alive: int = 0

    @property
    def total(self) -> int:
        """Every request sent."""
        return sum(self.calls.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.total,
            "waits": self.waits,
            "beside": self.beside,
            "kept_alive": self.kept_alive,
            "by_method": dict(sorted(self.calls.items())),
        }


@contextmanager
def counting(client: Client) -> Iterator[CallCounts]:
    """Count what `client` asks of coord inside the block (see the module docstring)."""
    counts = CallCounts()
    caller = threading.get_ident()
    aio = client._aio
    send_at, start_session, wait = aio.send_at, aio.start_session, client._wait

    async def counted_send_at(call: Any) -> Any:
        counts.calls[call.method] += 1
        return await send_at(call)

    async def counted_start_session(*args: Any, **kwargs: Any) -> Any:
        counts.kept_alive += 1
        return await start_session(*args, **kwargs)

    def counted_wait(coro: Any) -> Any:
        if threading.get_ident() == caller:
            counts.waits += 1
        else:
            counts.beside += 1
        return wait(coro)

    aio.send_at, aio.start_session, client._wait = (  # type: ignore[method-assign]
        counted_send_at,
        counted_start_session,
        counted_wait,
    )
    try:
        yield counts
    finally:
        del aio.send_at, aio.start_session, client._wait
