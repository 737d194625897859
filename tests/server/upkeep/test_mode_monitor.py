"""The mode monitor's way back to read-write, with a stand-in node: a barrier sent to a
leader that was deposed meanwhile is given up the moment the leader changes, instead of
holding the member read-only until the barrier's timeout."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from coord.server.node.driver import NodeOptions
from coord.server.upkeep.mode import READ_ONLY, READ_WRITE, ModeMonitor
from coord.sm.machine import CoordMachine
from tests.server.waits import wait_until


class _Node:
    def __init__(self) -> None:
        self.options = NodeOptions()
        self.me = SimpleNamespace(name="n2")
        self.term, self.leader = 3, "n1"

    def quorum_lost_for(self) -> float:
        return 0.0  # a quorum is back


def test_a_barrier_sent_to_a_deposed_leader_is_given_up_when_the_leader_changes():
    async def run() -> None:
        node = _Node()
        asked: list[str] = []

        async def barrier(timeout: float, give_up_when_cut_off: bool) -> None:
            asked.append(node.leader)
            if node.leader == "n1":  # SIGCONTed, deposed: it never answers
                await asyncio.sleep(timeout)
                raise AssertionError("waited out the whole barrier")

        mode = ModeMonitor(node, CoordMachine(), barrier, grace_s=30.0)
        mode._switch(READ_ONLY)
        step = asyncio.ensure_future(mode.step())
        await wait_until(lambda: asked == ["n1"], "the barrier sent to n1")
        assert not step.done()
        node.leader, node.term = "n3", 4
        await asyncio.wait_for(step, 10)  # given up, not waited out (30 s: the barrier fails)
        assert mode.mode == READ_ONLY  # not confirmed yet: the next step asks again
        await mode.step()
        assert mode.mode == READ_WRITE and asked == ["n1", "n3"]

    asyncio.run(run())
