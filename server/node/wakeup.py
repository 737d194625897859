"""The driver's wake-up flag: `asyncio.Event`'s set, clear and wait for its one waiter.

The driver waits on it once per turn and everything that gives it work sets it. An
`asyncio.Event` asks for the running loop on every wait (`asyncio.get_running_loop`,
which checks the process id: a getpid system call each time); this one asks once and
keeps the loop, and keeps no list of waiters, since there is only the driver."""

from __future__ import annotations

import asyncio


class Wakeup:
    """Set by anyone on the loop's thread; waited on by one task at a time."""

    __slots__ = ("_loop", "_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        """Return once set (at once if it is)."""
        if self._set:
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._waiter = waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
