"""The read barrier's give-up path, with a fake node whose ReadIndex never answers: a
member that goes cut off refuses the waiting read at once, and a caller's own
cancellation still cancels (it is not turned into a refusal)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coord.server.node.driver import NodeOptions
from coord.server.requests.coordinator import Coordinator
from coord.server.upkeep.mode import NO_QUORUM, Refused
from coord.sm.machine import CoordMachine


class _StuckNode:
    """Just enough of a Node for a Coordinator: ReadIndex rounds that never end."""

    def __init__(self) -> None:
        self.options = NodeOptions()
        self.me = SimpleNamespace(name="n1")
        self.term = 1
        self.reads_started = 0

    def quorum_lost_for(self) -> float:
        return 1.0

    async def read_index(self, timeout: float) -> int:
        self.reads_started += 1
        await asyncio.sleep(3600)
        return 0

    def read_barrier(self, timeout: float) -> asyncio.Future[int]:
        return asyncio.ensure_future(self.read_index(timeout))


async def _waiting_read() -> tuple[Coordinator, asyncio.Future]:
    """A Coordinator and a barrier waiting on its (stuck) ReadIndex."""
    node = _StuckNode()
    coord = Coordinator(node, CoordMachine(), link=None)
    read = asyncio.ensure_future(coord.barrier(timeout=30))
    while not node.reads_started:
        await asyncio.sleep(0)
    return coord, read


def test_a_waiting_read_is_refused_the_moment_the_member_is_cut_off():
    async def run() -> None:
        coord, read = await _waiting_read()
        coord.mode._switch(NO_QUORUM)
        with pytest.raises(Refused):  # now, not at the barrier's 30 s (nor the read's hour)
            await asyncio.wait_for(read, 10)
        assert not coord._reads

    asyncio.run(run())


def test_cancelling_the_caller_cancels_the_read():
    async def run() -> None:
        coord, read = await _waiting_read()
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        assert not coord._reads

    asyncio.run(run())
