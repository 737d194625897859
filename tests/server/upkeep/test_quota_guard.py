"""The space guard's decisions (server/upkeep/quota.py) on a real state machine whose
proposals apply at once, with the store's usage given."""

from __future__ import annotations

import asyncio

from coord.server.upkeep.quota import SpaceGuard
from coord.sm import commands as c
from coord.sm.machine import CoordMachine


def _guard(quota: int, disk: list[int]) -> tuple[SpaceGuard, CoordMachine, list]:
    m = CoordMachine()
    proposed: list = []
    snapshots: list[int] = []

    async def disk_bytes() -> int:
        return disk[0]

    async def propose(cmd):
        proposed.append(cmd)
        return m.execute(cmd)

    guard = SpaceGuard(quota, 5, m, disk_bytes, propose, lambda: snapshots.append(1))
    return guard, m, [proposed, snapshots]


def test_raise_over_quota_hold_in_between_lower_under_low_water():
    disk = [0]
    guard, m, (proposed, snapshots) = _guard(100_000, disk)
    assert asyncio.run(guard.step()) is None
    for i in range(40):
        m.execute(c.Put(b"k%d" % i, b"x" * 2_000))  # ~90 KB of values twice over
    assert asyncio.run(guard.step()) == "activate"
    assert m.alarms.has(5, "NOSPACE") and m.execute(c.Put(b"n", b"v")).error == "NO_SPACE"
    assert asyncio.run(guard.step()) is None  # raised already: nothing proposed again
    m.execute(c.DeleteRange(b"k", b"l"))
    m.execute(c.Compact(m.revision))
    disk[0] = 95_000  # the state is small now, the log is not
    assert asyncio.run(guard.step()) is None and snapshots, "the log was to be truncated"
    disk[0] = 20_000
    assert asyncio.run(guard.step()) == "deactivate"
    assert not m.alarms.active() and m.execute(c.Put(b"n", b"v")).ok
    assert [p.action for p in proposed] == ["activate", "deactivate"]


def test_the_disk_alone_raises_it_and_quota_0_is_off():
    disk = [150_000]
    guard, m, (proposed, _) = _guard(100_000, disk)
    assert asyncio.run(guard.step()) == "activate"
    off, _, _ = _guard(0, disk)
    assert not off._loop.enabled


def test_free_space_under_the_reserve_raises_it_and_over_by_a_tenth_lowers_it():
    m, free = CoordMachine(), [50_000]
    proposed: list = []

    async def measured(values: list[int]) -> int:
        return values[0]

    async def propose(cmd):
        proposed.append(cmd.action)
        return m.execute(cmd)

    guard = SpaceGuard(0, 5, m, lambda: measured([0]), propose, lambda: None,
                       free_bytes=lambda: measured(free), reserve_bytes=40_000)
    assert guard._loop.enabled  # no quota, but the free space is watched
    assert asyncio.run(guard.step()) is None
    free[0] = 39_000
    assert asyncio.run(guard.step()) == "activate"
    assert m.execute(c.Put(b"n", b"v")).error == "NO_SPACE"
    free[0] = 43_000  # over the reserve, not by a tenth: held
    assert asyncio.run(guard.step()) is None
    free[0] = 45_000
    assert asyncio.run(guard.step()) == "deactivate" and m.execute(c.Put(b"n", b"v")).ok
    assert proposed == ["activate", "deactivate"]
    assert guard.usage.free_bytes == 45_000
