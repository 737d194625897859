"""The node's clock: one Raft tick every `tick_ms`, never a burst.

Ticks missed while this process did not run (SIGSTOP, swap, a starved CPU, a long GC)
are dropped, as Go's time.Ticker drops them for etcd's raft loop. Delivered together
after the stall, they would run out every election and quorum timer at once, before the
messages that arrived meanwhile are read: a follower that merely ran late would start an
election, a leader would step down — on a loaded box, a cluster losing its leader again
and again though every member was alive (seen with the 100k-session benchmark at load
15). Raft's safety never rests on ticks (coord has no lease-based reads), only how soon
a dead leader is noticed: after a stall that is a full timeout later, counted from then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def tick_every(interval_s: float, tick: Callable[[], None]) -> None:
    """Call `tick()` every `interval_s` until cancelled; late by more than an interval,
    tick once at once and go on from now."""
    next_at = time.monotonic() + interval_s
    while True:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        tick()
        next_at += interval_s
        now = time.monotonic()
        if next_at < now:
            next_at = now + interval_s  # the ticks missed meanwhile are dropped
