"""The node's clock drops the ticks a stalled process missed (server/node/ticker.py):
after a stall of 20 intervals, at most one tick comes at once, not twenty — a burst
would run out every election timer before the messages that arrived are read."""

from __future__ import annotations

import asyncio
import time

from coord.server.node.ticker import tick_every

INTERVAL = 0.01


def _ticks_after_a_stall(stall_s: float) -> tuple[int, int]:
    """(ticks in the 5 intervals before a stall of `stall_s` that blocks the loop, ticks
    within half an interval after it)."""
    times: list[float] = []

    async def main() -> tuple[int, int]:
        task = asyncio.create_task(tick_every(INTERVAL, lambda: times.append(time.monotonic())))
        await asyncio.sleep(5 * INTERVAL)
        before = len(times)
        time.sleep(stall_s)  # the whole process stops: nothing on the loop runs
        resumed = time.monotonic()
        await asyncio.sleep(INTERVAL / 2)
        burst = sum(1 for t in times if resumed <= t <= resumed + INTERVAL / 2)
        task.cancel()
        return before, burst

    return asyncio.run(asyncio.wait_for(main(), 10))


def test_ticks_keep_their_pace():
    before, _ = _ticks_after_a_stall(0)
    assert 2 <= before <= 6


def test_a_stall_gives_at_most_one_tick_at_once():
    _, burst = _ticks_after_a_stall(20 * INTERVAL)
    assert burst <= 1, f"{burst} ticks at once after the stall"
