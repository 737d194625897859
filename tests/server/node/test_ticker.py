"""The node's clock drops the ticks a stalled process missed (server/node/ticker.py):
after a stall of 20 intervals, one tick comes at once, not twenty — a burst would run
out every election timer before the messages that arrived are read. On a clock of the
test's: time passes only when the ticker sleeps, or when the test stalls the process."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coord.server.node import ticker

INTERVAL = 0.01


class FakeTime:
    """The ticker's `time.monotonic` and `asyncio.sleep`: a sleep takes exactly what it
    asked, plus a stall the test put on the process meanwhile."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.stall = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds + self.stall
        self.stall = 0.0


class _Enough(Exception):
    pass


def _ticks(monkeypatch: pytest.MonkeyPatch, count: int, stall_after: int = 0,
           stall: float = 0.0) -> list[float]:
    """When the first `count` ticks came, in intervals from the start; the process
    stalls for `stall` s right after tick `stall_after`."""
    clock = FakeTime()
    monkeypatch.setattr(ticker, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(ticker, "asyncio", SimpleNamespace(sleep=clock.sleep))
    start, times = clock.now, []

    def tick() -> None:
        times.append(round((clock.now - start) / INTERVAL, 6))
        if len(times) == stall_after:
            clock.stall = stall
        if len(times) == count:
            raise _Enough

    with pytest.raises(_Enough):
        asyncio.run(ticker.tick_every(INTERVAL, tick))
    return times


def test_ticks_keep_their_pace(monkeypatch):
    assert _ticks(monkeypatch, 5) == [1, 2, 3, 4, 5]


def test_a_stall_gives_one_tick_at_once_then_the_pace_from_then(monkeypatch):
    # Stopped for 20 intervals after tick 3: tick 4 comes late, alone, and the ones
    # missed meanwhile are dropped.
    assert _ticks(monkeypatch, 6, stall_after=3, stall=20 * INTERVAL) == [1, 2, 3, 24, 25, 26]
