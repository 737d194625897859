"""The node driver's ReadIndex batching, in process on a one-member cluster: concurrent
reads share one round, reads that come while a round is in flight wait for the next
one, and every read still sees each write committed before it started."""

from __future__ import annotations

import asyncio

from coord.server.node.driver import Node
from coord.sm.commands import Put, encode_command
from tests.server.solo_node import on_leader


def _count_rounds(node: Node) -> list[bytes]:
    rounds: list[bytes] = []
    read_index = node._raw.read_index

    def counted(ctx: bytes) -> None:
        rounds.append(ctx)
        read_index(ctx)

    node._raw.read_index = counted
    return rounds


def test_concurrent_reads_share_one_round_and_see_prior_writes(tmp_path):
    async def body(node: Node) -> None:
        rounds = _count_rounds(node)
        written = await node.propose(encode_command(Put(b"k", b"v")))
        reads = await asyncio.gather(*(node.read_index() for _ in range(20)))
        assert len(rounds) == 1
        assert all(index >= written.index for index in reads)
        assert node.applied_index >= written.index

    on_leader(tmp_path, body)


def _hold_round_open(node: Node, ctx: bytes, for_ticks: int) -> None:
    """Make `ctx` look like a round still unanswered, as one would be mid-flight."""
    node._reads.round = ctx
    node._reads.round_tick = node._raw.now + for_ticks


def test_reads_arriving_during_a_round_wait_for_the_next_one(tmp_path):
    async def body(node: Node) -> None:
        rounds = _count_rounds(node)
        await node.read_index()
        _hold_round_open(node, rounds[0], 10**6)
        written = await node.propose(encode_command(Put(b"k", b"v2")))
        later = [asyncio.ensure_future(node.read_index()) for _ in range(10)]
        await asyncio.sleep(0.05)
        assert len(rounds) == 1  # the later reads did not start rounds of their own
        assert not any(f.done() for f in later)
        node._reads.round = None  # the round is answered
        node._wake.set()
        results = await asyncio.gather(*later)
        assert len(rounds) == 2  # ... they shared one, started after they came
        assert all(index >= written.index for index in results)

    on_leader(tmp_path, body)


def test_an_unanswered_round_stops_holding_reads_back(tmp_path):
    async def body(node: Node) -> None:
        rounds = _count_rounds(node)
        await node.read_index()
        _hold_round_open(node, rounds[0], 0)  # never answered (leadership moved, say)
        # Held for half an election timeout (two 10 ms ticks), not until the read's own
        # timeout: a round never answered would fail it with Timeout.
        await node.read_index(timeout=10.0)
        assert len(rounds) == 2

    on_leader(tmp_path, body)
