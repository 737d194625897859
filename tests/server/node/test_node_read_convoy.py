"""The read convoy in the node driver (`coord.server.node.read_convoy`): after a
ReadIndex round shared by k reads, the next round waits for k reads, or for the window
to pass since its first read arrived. Driven in process on member a of three, whose
peers answer only what the test writes (`tests.server.held_peers`)."""

from __future__ import annotations

import asyncio
import time

import pytest

from coord.raft.types import Message, MessageType
from coord.server.node import reads as node_reads
from coord.server.node.driver import Node, NodeOptions
from tests.clocks import FakeClock
from tests.server.held_peers import SLOW_TICKS, A, B, HeldPeers, elected, on_a
from tests.server.waits import wait_until


async def _round(node: Node, peers: HeldPeers, reads: int) -> None:
    """`reads` reads wait together, one round starts for them, and b answers it."""
    before = len(peers.read_rounds_to(B))
    futures = [node.read_barrier(10.0) for _ in range(reads)]
    await wait_until(lambda: len(peers.read_rounds_to(B)) > before, "a read round")
    _answer(peers, peers.read_rounds_to(B)[-1])
    await asyncio.gather(*futures)
    assert len(peers.read_rounds_to(B)) == before + 1


def _answer(peers: HeldPeers, heartbeat: Message) -> None:
    peers.answer(
        Message(
            MessageType.HEARTBEAT_RESP,
            to=A.id,
            frm=B.id,
            term=heartbeat.term,
            context=heartbeat.context,
        )
    )


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """The reads' monotonic clock stopped until the test moves it: the convoy's window
    passes when the test says so, however loaded the machine. The driver's timers still
    run on the event loop's clock; each one that fires makes the driver look again."""
    frozen = FakeClock(time.monotonic())
    monkeypatch.setattr(node_reads, "time", frozen)
    return frozen


def _held(node: Node) -> asyncio.TimerHandle | None:
    """The driver looked at the waiting reads and held their round: the window's timer."""
    return node._reads.convoy_timer


def test_after_a_shared_round_the_next_waits_for_as_many_reads(tmp_path, clock):
    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        await _round(node, peers, 3)
        rounds = len(peers.read_rounds_to(B))

        first, second = node.read_barrier(10.0), node.read_barrier(10.0)
        await wait_until(lambda: _held(node), "the two reads held")
        assert len(peers.read_rounds_to(B)) == rounds, "started before its convoy came"
        third = node.read_barrier(10.0)
        # The driver's clock stands still: the third read, not the window, starts it.
        await wait_until(lambda: len(peers.read_rounds_to(B)) == rounds + 1, "the round")
        _answer(peers, peers.read_rounds_to(B)[-1])
        await asyncio.gather(first, second, third)

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=10_000, **SLOW_TICKS))


def test_a_held_round_starts_when_the_window_has_passed(tmp_path, clock):
    """Fewer callers came back: the round goes with the reads there are, and the one
    after it waits only for that many."""

    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        await _round(node, peers, 3)
        rounds = len(peers.read_rounds_to(B))

        arrived = clock.now
        lone = node.read_barrier(10.0)
        timer = await _held_again(node, None, "the lone read held")
        clock.now = arrived + 0.299  # just short of the window: its timer fires, and
        await _held_again(node, timer, "the lone read held again, 299 ms on")  # holds on
        assert len(peers.read_rounds_to(B)) == rounds, "started before the window passed"
        clock.now = arrived + 0.3
        # The convoy's timer wakes the driver (no tick does, nor the test).
        await wait_until(lambda: len(peers.read_rounds_to(B)) == rounds + 1, "the held round")
        _answer(peers, peers.read_rounds_to(B)[-1])
        await lone

        # That round carried one read: the next is not held (the clock stands still, so a
        # held one would never start).
        await _round(node, peers, 1)

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=300, **SLOW_TICKS))


async def _held_again(
    node: Node, timer: asyncio.TimerHandle | None, what: str
) -> asyncio.TimerHandle:
    """Wait until the driver holds the round under a timer other than `timer` (it looked
    again after that one fired)."""
    await wait_until(lambda: _held(node) not in (None, timer), what)
    held = _held(node)
    assert held is not None
    return held


def test_a_lone_callers_reads_are_never_held(tmp_path, clock):
    """A caller alone makes rounds of one read: each starts as soon as it asks, however
    long the window (the driver's clock stands still: a held round would never start)."""

    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        for _ in range(5):
            await _round(node, peers, 1)

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=10_000, **SLOW_TICKS))
