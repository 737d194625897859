"""A read-only member's local sessions (server/requests/local_sessions.py) over a real state
machine and a stand-in coordinator whose writes apply at once: ids, local expiry,
registration and what each outcome tells the session's streams."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coord.server.node.errors import Timeout
from coord.server.requests.local_sessions import (
    DROPPED,
    MAX_ATTEMPTS,
    REGISTERED,
    RELEASED,
    LocalOutcome,
    LocalSessions,
)
from coord.server.upkeep.mode import READ_ONLY, READ_WRITE, ModeChange, Refused
from coord.sm import commands as c
from coord.sm.errors import CommandError
from coord.sm.machine import CoordMachine
from coord.sm.sessions import LOCAL_SESSION_IDS
from tests.clocks import FakeClock


class Coord:
    """The coordinator as the registry sees it: a mode, a machine, writes applied at once
    while read-write (or failing as told)."""

    def __init__(self) -> None:
        self.machine = CoordMachine()
        self.mode = SimpleNamespace(listeners=[], serving_writes=False)
        self.node = SimpleNamespace(me=SimpleNamespace(name="m3"))
        self.fail: list[Exception] = []  # raised by the next writes, in order
        self.writes: list[c.OpenSession] = []
        self.gate: asyncio.Event | None = None  # set: writes wait for it
        self.answers_lost = 0  # the next writes commit, then time out (the answer lost)

    async def write(self, cmd, timeout: float = 5.0, local_apply: bool = False):
        assert local_apply, "the member must have applied it before saying registered"
        self.writes.append(cmd)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise self.fail.pop(0)
        if not self.mode.serving_writes:
            raise Refused("read-only")
        res = self.machine.execute(cmd, 1_000)
        if self.answers_lost:
            self.answers_lost -= 1
            raise Timeout("committed, but the answer did not arrive in time")
        return res

    def switch(self, mode: str) -> None:
        self.mode.serving_writes = mode == READ_WRITE
        for listener in self.mode.listeners:
            listener(ModeChange(mode, "m3", 2, self.machine.revision))


def _registry(draws: list[int] | None = None):
    coord, clock, told = Coord(), FakeClock(100.0), []
    draw = (lambda bits: draws.pop(0)) if draws is not None else None
    kwargs = {"draw": draw} if draw else {}
    return LocalSessions(coord, told.append, clock=clock, **kwargs), coord, clock, told


async def _settled(registry: LocalSessions) -> None:
    for _ in range(100):  # the registration task: a few loop turns at most
        await asyncio.sleep(0)
        if registry._registering is None or registry._registering.done():
            return
    raise AssertionError("registration did not settle")


def test_ids_are_local_and_never_one_a_session_already_has():
    base = LOCAL_SESSION_IDS.start

    async def run() -> None:
        registry, coord, _, _ = _registry(draws=[5, 5, 7, 7, 7, 9])
        coord.machine.execute(c.OpenSession("planted", 5_000, session_id=base + 7), 1)
        first = registry.open("a", 2_000, "r1")
        assert first.id == base + 5
        # base+5 is a live local session, base+7 a cluster session: both skipped.
        assert registry.open("b", 2_000, "r2").id == base + 9
        with pytest.raises(RuntimeError):  # every draw taken: refused, never shared
            registry.draw = lambda bits: 5
            registry.open("c", 2_000, "r3")

    asyncio.run(run())


def test_the_replicated_allocator_stays_below_the_local_range():
    m = CoordMachine()
    m.sessions.next_id = LOCAL_SESSION_IDS.start - 2
    ids = [m.execute(c.OpenSession("s", 5_000), 1).session_id for _ in range(2)]
    assert all(i not in LOCAL_SESSION_IDS for i in ids)
    # (the counter would need 2**62 opens to get there; this is where it would cross)


def test_open_refuses_what_no_session_may_have_and_a_retry_gets_the_same_session():
    async def run() -> None:
        registry, _, _, _ = _registry()
        with pytest.raises(CommandError) as bad:
            registry.open("x", 10, "r1")
        assert bad.value.code == "INVALID_ARGUMENT"
        first = registry.open("x", 2_000, "r1")
        assert registry.open("x", 2_000, "r1") is first and len(registry) == 1
        assert first.id in LOCAL_SESSION_IDS

    asyncio.run(run())


def test_a_local_session_without_keepalives_is_dropped_after_its_ttl_and_a_stall_forgives():
    async def run() -> None:
        registry, _, clock, told = _registry()
        kept, idle = registry.open("kept", 2_000, "r1"), registry.open("idle", 2_000, "r2")
        for _ in range(9):  # 2.25 s of sweeps every 0.25 s
            clock.now += 0.25
            assert registry.keepalive(kept.id) == 2_000
            await registry.sweep()
        assert registry.get(kept.id) is kept and registry.get(idle.id) is None
        assert [(o.type, o.session_id) for o in told] == [(DROPPED, idle.id)]
        assert "no keepalive for its TTL" in told[0].reason
        clock.now += 5.0  # this process was stopped for 5 s: nobody could reach it
        await registry.sweep()
        assert registry.get(kept.id) is kept

    asyncio.run(run())


def test_back_to_read_write_registers_each_local_session_under_its_own_id():
    async def run() -> None:
        registry, coord, _, told = _registry()
        a, b = registry.open("a", 2_000, "r1"), registry.open("b", 3_000, "r2")
        coord.switch(READ_WRITE)
        await _settled(registry)
        assert sorted((o.type, o.session_id) for o in told) == sorted(
            [(REGISTERED, a.id), (REGISTERED, b.id)])
        for s in (a, b):
            cluster = coord.machine.sessions.get(s.id)
            assert (cluster.name, cluster.ttl_ms, cluster.read_only_ok) == (s.name, s.ttl_ms, True)
            assert registry.outcome(s.id).type == REGISTERED and registry.get(s.id) is None
        assert {w.request_id for w in coord.writes} == {"r1", "r2"}  # retry-safe

    asyncio.run(run())


def test_a_refused_registration_ends_the_session_saying_why():
    async def run() -> None:
        registry, coord, _, told = _registry()
        s = registry.open("a", 2_000, "r1")
        coord.machine.execute(c.OpenSession("planted", 5_000, session_id=s.id), 1)
        coord.switch(READ_WRITE)
        await _settled(registry)
        assert [o.type for o in told] == [DROPPED]
        assert "SESSION_EXISTS" in told[0].reason and "m3" in told[0].reason
        assert coord.machine.sessions.get(s.id).name == "planted"  # untouched

    asyncio.run(run())


def test_an_open_retried_on_a_cut_off_member_is_not_registered_as_another_session():
    """The client's first try of the open was committed elsewhere before this member was
    cut off; its retry here opened a local session. The registration's request id is the
    open's, so the state machine answers with the first session: that is not this one."""

    async def run() -> None:
        registry, coord, _, told = _registry()
        first = coord.machine.execute(c.OpenSession("a", 2_000, True, "r1"), 1)
        s = registry.open("a", 2_000, "r1")
        coord.switch(READ_WRITE)
        await _settled(registry)
        assert [o.type for o in told] == [DROPPED]
        assert f"had already opened session {first.session_id}" in told[0].reason
        assert s.id not in coord.machine.sessions

    asyncio.run(run())


def test_a_registration_answered_after_the_cluster_expired_the_session_is_dropped():
    """The registration committed but its answer was lost; while the member retried, its
    client's keepalives stayed here (the session was still local to it), so the leader
    expired the cluster's copy after its TTL. The retry is answered from the state
    machine's memory of the request id: the member must not say `registered` for a
    session the cluster no longer has."""

    async def run() -> None:
        registry, coord, _, told = _registry()
        s = registry.open("a", 2_000, "r1")
        coord.answers_lost = 1
        coord.switch(READ_WRITE)
        await _settled(registry)
        assert told == [] and s.attempts == 1 and s.id in coord.machine.sessions
        coord.machine.execute(c.ExpireSessions((s.id,)), 4_000)
        await registry.sweep()
        await _settled(registry)
        assert [o.type for o in told] == [DROPPED]
        assert f"session {s.id} was registered, then expired by the cluster" in \
            told[0].reason
        assert registry.get(s.id) is None and s.id not in coord.machine.sessions

    asyncio.run(run())


def test_cut_off_again_mid_registration_keeps_it_local_and_failures_are_bounded():
    async def run() -> None:
        registry, coord, _, told = _registry()
        s = registry.open("a", 2_000, "r1")
        coord.switch(READ_WRITE)
        coord.mode.serving_writes = False  # gone again before the write
        coord.fail = [Refused("read-only again")]
        await _settled(registry)
        assert registry.get(s.id) is s and not s.registering and s.attempts == 0
        assert told == []
        coord.switch(READ_WRITE)
        coord.fail = [Timeout("no leader")] * MAX_ATTEMPTS
        for _ in range(MAX_ATTEMPTS):
            await registry.sweep()  # each sweep tries again
            await _settled(registry)
        assert [o.type for o in told] == [DROPPED]
        assert f"{MAX_ATTEMPTS} attempts" in told[0].reason

    asyncio.run(run())


def test_close_ends_a_local_session_and_waits_out_a_registration():
    async def run() -> None:
        registry, coord, _, told = _registry()
        a, b = registry.open("a", 2_000, "r1"), registry.open("b", 2_000, "r2")
        assert await registry.close(a.id) == RELEASED
        assert told == [LocalOutcome(RELEASED, a.id, coord.machine.revision,
                                     "closed by its client while member-local")]
        assert await registry.close(a.id) is None  # not live any more
        coord.gate = asyncio.Event()
        coord.switch(READ_WRITE)
        for _ in range(10):
            await asyncio.sleep(0)
        assert b.registering and coord.writes  # the write is in flight
        closing = asyncio.ensure_future(registry.close(b.id))
        await asyncio.sleep(0)
        assert not closing.done()
        coord.gate.set()
        assert await closing == REGISTERED  # the caller closes it in the cluster

    asyncio.run(run())


def test_only_a_return_to_read_write_starts_registration():
    async def run() -> None:
        registry, coord, _, told = _registry()
        registry.open("a", 2_000, "r1")
        coord.switch(READ_ONLY)
        await registry.sweep()
        await _settled(registry)
        assert coord.writes == [] and told == []

    asyncio.run(run())
