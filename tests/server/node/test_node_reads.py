"""The node driver's linearizable reads. On member a of three, whose peers answer only
what the test writes (`tests.server.held_peers`): concurrent reads share one ReadIndex
round, reads that come while a round is in flight wait for the next one, a round never
answered stops holding reads back, and every read sees each write committed before it
started. On a one-member cluster: a read needs no round and no driver turn at all."""

from __future__ import annotations

import asyncio

from coord.raft.types import Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from coord.sm.commands import Put, encode_command
from tests.server.held_peers import SLOW_TICKS, A, B, HeldPeers, ack, elected, on_a
from tests.server.solo_node import on_leader
from tests.server.waits import wait_until


def _answer(peers: HeldPeers, heartbeat: Message) -> None:
    """b acknowledges a round's heartbeat."""
    peers.answer(Message(MessageType.HEARTBEAT_RESP, to=A.id, frm=B.id, term=heartbeat.term,
                         context=heartbeat.context))


async def _written(node: Node, peers: HeldPeers) -> int:
    """A put committed with b's ack: its index."""
    before = len(peers.appends_to(B, node.applied_index))
    proposed = asyncio.ensure_future(node.propose(encode_command(Put(b"k", b"v"))))
    await wait_until(lambda: len(peers.appends_to(B, node.applied_index)) > before, "the put")
    await ack(node, peers, peers.appends_to(B, node.applied_index)[-1])
    return (await proposed).index


async def _turn(node: Node) -> None:
    """A driver turn, begun after this call, that has looked at the waiting reads."""
    turns = node.round_counts.driver_turns
    node._wake.set()
    await wait_until(lambda: node.round_counts.driver_turns > turns, "a driver turn")


async def _tick(node: Node) -> None:
    """One tick of a's clock, and a driver turn after it."""
    node._raw.tick()
    await _turn(node)


def test_concurrent_reads_share_one_round_and_see_prior_writes(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        written = await _written(node, peers)
        reads = [node.read_barrier(10.0) for _ in range(20)]
        await wait_until(lambda: peers.read_rounds_to(B), "a read round")
        _answer(peers, peers.read_rounds_to(B)[0])
        indexes = await asyncio.gather(*reads)
        assert len(peers.read_rounds_to(B)) == 1
        assert all(index >= written for index in indexes)

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))


def test_reads_arriving_during_a_round_wait_for_the_next_one(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        first = node.read_barrier(10.0)
        await wait_until(lambda: peers.read_rounds_to(B), "the first round")
        written = await _written(node, peers)
        later = [node.read_barrier(10.0) for _ in range(10)]
        await _turn(node)
        assert len(peers.read_rounds_to(B)) == 1  # not while the first is in flight
        _answer(peers, peers.read_rounds_to(B)[0])
        await first
        # the later reads came after the first round's index was taken: a round of
        # their own, shared, started only now
        await wait_until(lambda: len(peers.read_rounds_to(B)) == 2, "the second round")
        assert not any(f.done() for f in later)
        _answer(peers, peers.read_rounds_to(B)[1])
        indexes = await asyncio.gather(*later)
        assert len(peers.read_rounds_to(B)) == 2
        assert all(index >= written for index in indexes)

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))


def test_an_unanswered_round_stops_holding_reads_back(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        await elected(node, peers)
        lost = node.read_barrier(10.0)  # its round's heartbeat never gets an answer
        await wait_until(lambda: peers.read_rounds_to(B), "the first round")
        held = node.read_barrier(10.0)
        # Held for half an election timeout (5 of SLOW_TICKS' 10, ticked here), not
        # until the read's own timeout: a round never answered would fail it with Timeout.
        for _ in range(4):
            await _tick(node)
        assert len(peers.read_rounds_to(B)) == 1
        await _tick(node)
        await wait_until(lambda: len(peers.read_rounds_to(B)) == 2, "the second round")
        _answer(peers, peers.read_rounds_to(B)[1])
        await asyncio.gather(lost, held)  # the later round's answer covers the earlier

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))


def _asked_of_the_driver(node: Node) -> list[asyncio.Future]:
    """Every read `node` hands its driver from now on: to a round, or to wait for an
    apply (either wakes the driver)."""
    asked: list[asyncio.Future] = []
    add, wait_applied = node._reads.add, node._reads.wait_applied

    def to_round(fut: asyncio.Future) -> None:
        asked.append(fut)
        add(fut)

    def to_apply(index: int, fut: asyncio.Future) -> None:
        asked.append(fut)
        wait_applied(index, fut)

    node._reads.add, node._reads.wait_applied = to_round, to_apply
    return asked


def test_the_only_voter_reads_with_no_round_and_no_driver_turn(tmp_path):
    async def body(node: Node) -> None:
        written = await node.propose(encode_command(Put(b"k", b"v")))
        asked = _asked_of_the_driver(node)
        reads = [node.read_barrier(10.0) for _ in range(20)]
        assert all(read.done() for read in reads)
        assert all(read.result() >= written.index for read in reads)
        assert asked == []

    on_leader(tmp_path, body)


def test_the_only_voter_reads_after_applying_what_it_committed(tmp_path):
    """A read that comes between a commit and its apply (here: the driver applies one
    entry per Ready, and the read comes while it is between two) waits for the apply
    of the commit index it read at."""

    async def body(node: Node) -> None:
        node._raw.MAX_APPLY_BATCH = 1
        asked = _asked_of_the_driver(node)
        between: list[tuple[int, asyncio.Future]] = []
        after_apply = node._snaps.after_apply

        def reading_between(applied: int) -> bool:
            committed = node._raw.status().commit
            if committed > node.applied_index and not between:
                between.append((committed, node.read_barrier(10.0)))
            return after_apply(applied)

        node._snaps.after_apply = reading_between
        await asyncio.gather(*(node.propose(encode_command(Put(b"k%d" % i, b"v")))
                               for i in range(5)))
        assert between, "no read came between a commit and its apply"
        committed, read = between[0]
        assert asked == [read]  # not answered at once: it waited for the apply
        assert await read == committed
        assert node.applied_index >= committed

    on_leader(tmp_path, body)
