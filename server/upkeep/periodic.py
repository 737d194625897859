"""A member's background tasks (the leader note) and loops (session sweep, mode monitor,
auto-compaction, space guard: one step every interval), started with the member and
cancelled with it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from coord.server.node.errors import NodeError

log = logging.getLogger(__name__)


def deferring(step: Callable[[], Awaitable[Any]], who: str, what: str
              ) -> Callable[[], Awaitable[None]]:
    """`step`, with a NodeError (no leader, a lost proposal, ...) logged as `what`
    deferred to the next step instead of ending the loop."""

    async def run() -> None:
        try:
            await step()
        except NodeError as e:
            log.warning("%s: %s deferred: %s", who, what, e)

    return run


class Background:
    """A coroutine run as a task from the member's start until its stop."""

    def __init__(self, name: str, run: Callable[[], Awaitable[None]],
                 enabled: bool = True) -> None:
        """`enabled` False: start and stop do nothing (a loop turned off by a flag)."""
        self.name = name
        self.run = run
        self.enabled = enabled
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if not self.enabled:
            return
        self._task = asyncio.get_running_loop().create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass



class Periodic(Background):
    """One step every interval."""

    def __init__(self, name: str, interval_s: float, step: Callable[[], Awaitable[None]],
                 enabled: bool = True) -> None:
        super().__init__(name, self._every, enabled)
        self.interval_s = interval_s
        self.step = step

    async def _every(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.step()
