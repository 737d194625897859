"""A snapshot is serialized in a thread: the driver keeps ticking (so heartbeats go on)
while it runs, holds back applying what commits meanwhile, applies it in order once
the snapshot is stored, and a restart from that snapshot has every write."""

from __future__ import annotations

import asyncio
import time

from coord.server.members import MemberInfo
from coord.server.node import Node, NodeOptions
from coord.sm.commands import Put, Range, encode_command
from coord.sm.machine import CoordMachine

SNAPSHOT_S = 0.5


class SlowSnapshots(CoordMachine):
    """Takes SNAPSHOT_S to serialize, like a large state does."""

    def snapshot(self) -> bytes:
        time.sleep(SNAPSHOT_S)
        return super().snapshot()


def _node(path, machine: CoordMachine) -> Node:
    me = MemberInfo("solo", "127.0.0.1:1")
    options = NodeOptions(tick_ms=10, election_ticks=4, snapshot_every=20, seed=1)
    return Node(me, path, [me], machine, b"secret", options)


async def _wait_leader(node: Node) -> None:
    for _ in range(500):
        if node.caught_up_leader:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the one-member cluster elected no leader")


def _value(machine: CoordMachine, key: bytes) -> bytes | None:
    kvs = machine.query(Range(key)).kvs
    return kvs[0].value if kvs else None


def test_a_slow_snapshot_does_not_stop_ticks_and_writes_apply_after_it(tmp_path):
    async def run() -> None:
        node = _node(tmp_path, SlowSnapshots())
        await node.start()
        try:
            await _wait_leader(node)
            while not node._snaps.running:  # write until a snapshot starts
                await node.propose(encode_command(Put(b"fill", b"x")))
            ticks, t0 = node._raw.raft.now, time.monotonic()
            during = asyncio.ensure_future(node.propose(encode_command(Put(b"k", b"during"))))
            while node._snaps.running:
                await asyncio.sleep(0.01)
            assert time.monotonic() - t0 > SNAPSHOT_S / 2
            assert node._raw.raft.now - ticks >= 10  # the core kept ticking throughout
            applied = await during
            assert _value(node.sm, b"k") == b"during"
            assert node.status().snapshot_index > 0
            assert node.status().applied == node.applied_index >= applied.index
        finally:
            await node.stop()
        again = _node(tmp_path, CoordMachine())
        await again.start()
        try:
            assert _value(again.sm, b"k") == b"during"
            assert again.applied_index >= applied.index
        finally:
            await again.stop()

    asyncio.run(run())
