"""Waiting on a condition inside a test's event loop, bounded in time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def wait_until(pred: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll `pred` every 5 ms until it holds; fail naming `what` after `timeout` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)
