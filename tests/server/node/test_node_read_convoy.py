"""The read convoy in the node driver (`coord.server.node.read_convoy`): after a
ReadIndex round shared by k reads, the next round waits for k reads, or for the window
to pass since its first read arrived. Driven in process on member a of three, whose
peers answer only what the test writes (`tests.server.held_peers`)."""

from __future__ import annotations

import asyncio
import time

from coord.raft.types import Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from tests.server.held_peers import A, B, HeldPeers, elected, on_a
from tests.server.waits import wait_until

# A tick every 20 s: no election, check-quorum or heartbeat moves during a test, and
# nothing wakes the driver but the test's messages, its reads and the convoy's timer.
SLOW_TICKS = dict(tick_ms=20_000, election_ticks=10, seed=1)


async def _round(node: Node, peers: HeldPeers, reads: int) -> None:
    """`reads` reads wait together, one round starts for them, and b answers it."""
    before = len(peers.read_rounds_to(B))
    futures = [node.read_barrier(10.0) for _ in range(reads)]
    await wait_until(lambda: len(peers.read_rounds_to(B)) > before, "a read round")
    _answer(peers, peers.read_rounds_to(B)[-1])
    await asyncio.gather(*futures)
    assert len(peers.read_rounds_to(B)) == before + 1


def _answer(peers: HeldPeers, heartbeat: Message) -> None:
    peers.answer(Message(MessageType.HEARTBEAT_RESP, to=A.id, frm=B.id,
                         term=heartbeat.term, context=heartbeat.context))


def test_after_a_shared_round_the_next_waits_for_as_many_reads(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        await _round(node, peers, 3)
        rounds = len(peers.read_rounds_to(B))

        first, second = node.read_barrier(10.0), node.read_barrier(10.0)
        await asyncio.sleep(0.2)
        assert len(peers.read_rounds_to(B)) == rounds, "started before its convoy came"
        third = node.read_barrier(10.0)
        # The third read starts it at once: far sooner than the 10 s window.
        await wait_until(lambda: len(peers.read_rounds_to(B)) == rounds + 1, "the round",
                         timeout=2.0)
        _answer(peers, peers.read_rounds_to(B)[-1])
        await asyncio.gather(first, second, third)

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=10_000, **SLOW_TICKS))


def test_a_held_round_starts_when_the_window_has_passed(tmp_path):
    """Fewer callers came back: the round goes with the reads there are, and the one
    after it waits only for that many."""

    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        await _round(node, peers, 3)
        rounds = len(peers.read_rounds_to(B))

        arrived = time.monotonic()
        lone = node.read_barrier(10.0)
        await asyncio.sleep(0.1)
        assert len(peers.read_rounds_to(B)) == rounds
        await wait_until(lambda: len(peers.read_rounds_to(B)) == rounds + 1, "the held round",
                         timeout=3.0)  # the convoy's timer woke the driver: no tick did
        assert time.monotonic() - arrived >= 0.3
        _answer(peers, peers.read_rounds_to(B)[-1])
        await lone

        # That round carried one read: the next is not held.
        started = time.monotonic()
        await _round(node, peers, 1)
        assert time.monotonic() - started < 0.3

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=300, **SLOW_TICKS))


def test_a_lone_callers_reads_are_never_held(tmp_path):
    """A caller alone makes rounds of one read: each starts as soon as it asks, however
    long the window."""

    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        for _ in range(5):
            started = time.monotonic()
            await _round(node, peers, 1)
            assert time.monotonic() - started < 2.0

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=10_000, **SLOW_TICKS))
