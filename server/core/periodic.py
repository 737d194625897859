"""A member's background loops (session sweep, mode monitor): one step every interval,
started with the member and cancelled with it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Periodic:
    def __init__(self, name: str, interval_s: float, step: Callable[[], Awaitable[None]]) -> None:
        self.name = name
        self.interval_s = interval_s
        self.step = step
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.step()
