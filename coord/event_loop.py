"""The event loop a coord server process runs on (a member, and `coord bench etcd`'s gRPC
floor, which must pay what a member pays per call): uvloop where it is installed (the
default), else asyncio's own; `--event-loop asyncio` picks asyncio's anyway.

Why: every request on a member is a chain of loop turns (a gRPC completion, the driver's
wake-up, the peer stream's write), and uvloop runs the loop's own part of each (the
ready queue, timers, the selector) in C: a member's CPU per put down ~10-15% (same-run
A/B/A/B, `coord bench etcd`). The state machine is not affected: it never sees the loop."""

from __future__ import annotations

import asyncio
import gc
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


FULL_COLLECTION_EVERY = 1000
"""Young-generation passes between the cyclic collector's looks at its oldest generation
(Python's default: 10). A member's state (keys, their history, remembered answers) is
hundreds of thousands of long-lived acyclic records, and a busy member keeps promoting
short-lived request objects into the oldest generation, so at the default the collector
made a full pass over all of it every half second or so on the leader and found nothing:
64 clients' stream puts for 8 s (3 members, 150,000 entries' state) took 26 full passes
across the members, 1.18 s of stopped loops, the longest 107 ms, and set the p99. With
1000 there were none in the 8 s. Reference counting frees acyclic garbage at once either
way; this only makes the search for cycles in old objects rarer (and the young
generations are collected as before)."""


def tune_collector() -> None:
    """The member process's cyclic-collector thresholds: see FULL_COLLECTION_EVERY."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


def run(main: Coroutine[Any, Any, T], event_loop: str = "uvloop") -> T:
    """`asyncio.run(main)` on the named loop, in a member process (see `tune_collector`)."""
    tune_collector()
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        return runner.run(main)
