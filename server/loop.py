"""The event loop a member process runs on: uvloop where it is installed (the default),
else asyncio's own; `--event-loop asyncio` picks asyncio's anyway.

Why: every request on a member is a chain of loop turns (a gRPC completion, the driver's
wake-up, the peer stream's write), and uvloop runs the loop's own part of each (the
ready queue, timers, the selector) in C. Measured in issue 14's notes: a member's CPU per
put down ~10-15% (same-run A/B/A/B, `coord bench etcd`). The state machine is not
affected: it never sees the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("uvloop", "asyncio")


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function for `name`; uvloop falls back to asyncio's if not installed."""
    if name not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {name!r} (one of {', '.join(EVENT_LOOPS)})")
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            return asyncio.new_event_loop
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], event_loop: str = "uvloop") -> T:
    """`asyncio.run(main)` on the named loop."""
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        return runner.run(main)
