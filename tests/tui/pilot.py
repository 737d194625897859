"""Waiting on a console that textual's pilot drives: the app keeps running meanwhile."""

from __future__ import annotations

import time
from collections.abc import Callable


async def until(pilot, predicate: Callable[[], bool], limit_s: float, what: str) -> float:
    """Seconds until `predicate` held (the app keeps running meanwhile)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > limit_s:
            raise AssertionError(f"{what}: not within {limit_s}s")
        await pilot.pause(0.02)
    return time.monotonic() - start
