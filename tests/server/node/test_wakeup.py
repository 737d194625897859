"""The driver's wake-up flag behaves as asyncio.Event does for its one waiter: a set
before the wait is not lost, a set wakes the waiter, a clear re-arms it, and a cancelled
wait leaves it usable."""

from __future__ import annotations

import asyncio

import pytest

from coord.server.node.wakeup import Wakeup


def test_set_wakes_the_waiter_and_is_kept_until_cleared():
    async def body() -> None:
        wake = Wakeup()
        wake.set()
        await asyncio.wait_for(wake.wait(), 5)  # set before: returns at once
        assert wake.is_set()
        wake.clear()
        waiting = asyncio.ensure_future(wake.wait())
        await asyncio.sleep(0)
        assert not waiting.done()
        wake.set()
        await asyncio.wait_for(waiting, 5)
        wake.set()  # a second set before a clear changes nothing
        assert wake.is_set()

    asyncio.run(body())


def test_a_cancelled_wait_leaves_the_flag_usable():
    async def body() -> None:
        wake = Wakeup()
        waiting = asyncio.ensure_future(wake.wait())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        wake.set()  # no waiter: nothing to wake, and no error
        again = asyncio.ensure_future(wake.wait())
        await asyncio.wait_for(again, 5)

    asyncio.run(body())
