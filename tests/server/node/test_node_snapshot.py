"""A snapshot is serialized a slice at a time from a capture of the state: the driver
keeps ticking (so heartbeats go on) and applying in between, the snapshot holds the state
as captured (not the writes applied meanwhile), and a restart from it has every write.
How often: after `snapshot_every` entries once the log outgrows the last snapshot
(SNAPSHOT_EXPANSION), by SNAPSHOT_EVERY_MAX times that at the latest, or by bytes."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Iterator

from coord.server.node.snapshots import SNAPSHOT_EVERY_MAX, SNAPSHOT_EXPANSION
from coord.server.storage.log_format import split_snapshot
from coord.sm.commands import Put, Range, encode_command
from coord.sm.machine import CoordMachine
from tests.server.solo_node import leading, solo_node
from tests.server.waits import wait_until

HOLD_SLICES_MAX = 30_000  # 1 ms or more each: a held snapshot ends by itself after 30 s
WAIT_S = 20.0  # catches a hang only: every wait below is on what the node did


class HeldSnapshots(CoordMachine):
    """Serializes a capture a slice (1 ms) at a time for as long as the test holds the
    snapshot open, like a large state does: until `hold` is cleared the snapshot is
    provably still in progress, however fast or loaded the machine is."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = True

    def capture(self) -> Iterator[bytes]:
        return itertools.chain(self._held_slices(), super().capture())

    def _held_slices(self) -> Iterator[bytes]:
        for _ in range(HOLD_SLICES_MAX):
            if not self.hold:
                return
            time.sleep(0.001)
            yield b""


def _machine_of(snapshot: bytes) -> CoordMachine:
    machine = CoordMachine()
    machine.restore(split_snapshot(snapshot)[1])  # after the member list
    return machine


def _value(machine: CoordMachine, key: bytes) -> bytes | None:
    kvs = machine.query(Range(key)).kvs
    return kvs[0].value if kvs else None


def test_writes_apply_while_a_slow_snapshot_is_serialized(tmp_path):
    """The test holds a snapshot open: while it is still being serialized, a write is
    applied and the core ticks; once let go, it holds the state as captured."""

    async def run() -> None:
        machine = HeldSnapshots()
        parts = await leading(tmp_path, machine, snapshot_every=20)
        node = parts.node
        try:
            for _ in range(SNAPSHOT_EVERY_MAX * 20 + 1):  # write until a snapshot starts
                if node._snaps.running:
                    break
                await node.propose(encode_command(Put(b"fill", b"x")))
            assert node._snaps.running, "no snapshot started"
            ticks = node._raw.now
            applied = await node.propose(encode_command(Put(b"k", b"during")))
            assert _value(machine, b"k") == b"during"
            await wait_until(lambda: node._raw.now - ticks >= 10, "10 ticks", WAIT_S)
            assert node._snaps.running  # all of it while the snapshot was held open
            machine.hold = False
            await wait_until(lambda: not node._snaps.running, "the snapshot to end", WAIT_S)
            status = node.status()
            assert 0 < status.snapshot_index < applied.index  # as captured, before "k"
            assert status.applied == node.applied_index >= applied.index
            taken = _machine_of(node._raw.raft.log.snapshot.data)
            assert _value(taken, b"fill") == b"x" and _value(taken, b"k") is None
        finally:
            machine.hold = False
            await parts.close()
        restored = CoordMachine()
        again = solo_node(tmp_path, restored, snapshot_every=20)
        await again.node.start()
        try:
            assert _value(restored, b"k") == b"during"
            assert again.node.applied_index >= applied.index
        finally:
            await again.close()

    asyncio.run(run())


def test_big_entries_snapshot_by_bytes_before_the_entry_count(tmp_path):
    """Entries of many bytes (txns of many puts) snapshot after `snapshot_bytes` of log,
    long before `snapshot_every` entries: the log a restart replays stays short."""

    async def run() -> None:
        parts = await leading(tmp_path, snapshot_every=1_000_000, snapshot_bytes=20_000)
        node = parts.node
        try:
            for i in range(40):  # 40 KB of log: at least one snapshot by bytes
                await node.propose(encode_command(Put(b"big%d" % i, b"x" * 1_000)))
                if node.status().snapshot_index:
                    break
            for _ in range(200):
                if node.status().snapshot_index:
                    break
                await asyncio.sleep(0.01)
            assert 0 < node.status().snapshot_index < 40, "no snapshot by bytes"
        finally:
            await parts.close()

    asyncio.run(run())


def test_a_big_state_is_snapshotted_when_the_log_outgrows_it_not_every_n_entries(tmp_path):
    """With a 64 KB value in the state, 20 small puts (snapshot_every) are far less log
    than the snapshot: the next waits, until SNAPSHOT_EVERY_MAX * 20 entries. Then puts
    of 16 KB make the log outgrow the snapshot within 20 entries, and one is taken."""

    async def run() -> None:
        parts = await leading(tmp_path, snapshot_every=20)
        node = parts.node
        try:

            async def put(value: bytes) -> int:
                return (await node.propose(encode_command(Put(b"k", value)))).index

            async def settled() -> int:
                for _ in range(300):  # a snapshot started is done within 3 s
                    if not node._snaps.running:
                        break
                    await asyncio.sleep(0.01)
                return node.status().snapshot_index

            await put(os.urandom(64 << 10))
            while await settled() == 0:  # the first, after 20 entries as ever
                await put(b"s")
            first = await settled()
            size = len(node._raw.raft.log.snapshot.data)
            assert size > 64 << 10
            small = [await put(b"s") for _ in range(60)]  # 3x snapshot_every, ~5 KB of log
            assert await settled() == first, "snapshotted before the log outgrew the last"
            last = small[-1]
            while last < first + SNAPSHOT_EVERY_MAX * 20:
                last = await put(b"s")
            await put(b"s")
            capped = await settled()
            assert first < capped <= first + SNAPSHOT_EVERY_MAX * 20 + 1
            size = len(node._raw.raft.log.snapshot.data)
            blob = os.urandom(16 << 10)  # incompressible: the log grows 16 KB a put
            need = int(SNAPSHOT_EXPANSION * size / len(blob)) + 1
            for _ in range(max(need, 20) + 1):
                await put(blob)
            assert await settled() > capped, "the log outgrew the snapshot, none was taken"
        finally:
            await parts.close()

    asyncio.run(run())
