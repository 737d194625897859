"""Group commit in the node driver: a leader proposes the next batch only once its last
one has applied, so proposals that arrive one by one while a batch is in flight go out
together. Driven in process: member "a" of a three-member cluster, whose peers are a
transport that records what a sends and delivers only the answers the test writes."""

from __future__ import annotations

import asyncio

import pytest

from coord.raft.types import Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.errors import NotLeader
from coord.sm.commands import Put, encode_command
from tests.server.held_peers import A, B, C, HeldPeers, ack, elected, on_a
from tests.server.waits import wait_until


def _put(node: Node, n: int) -> asyncio.Task:
    return asyncio.ensure_future(node.propose(encode_command(Put(b"k%d" % n, b"v")), 10.0))


def test_proposals_arriving_while_a_batch_is_in_flight_go_out_as_one_batch(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await elected(node, peers)
        first = _put(node, 0)
        await wait_until(lambda: peers.appends_to(B, acked), "the first put's append")
        [in_flight] = peers.appends_to(B, acked)
        assert [e.index for e in in_flight.entries] == [acked + 1]

        later = []
        for n in range(1, 6):  # one by one, as unary calls come
            later.append(_put(node, n))
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        # none of them was proposed while the first was uncommitted
        assert peers.appends_to(B, acked + 1) == []
        assert not any(t.done() for t in [first, *later])

        await ack(node, peers, in_flight)
        assert (await first).index == acked + 1
        await wait_until(lambda: peers.appends_to(B, acked + 1), "the next batch")
        [batch] = peers.appends_to(B, acked + 1)
        assert [e.index for e in batch.entries] == list(range(acked + 2, acked + 7))

        await ack(node, peers, batch)
        assert sorted(a.index for a in await asyncio.gather(*later)) == list(
            range(acked + 2, acked + 7))

    on_a(tmp_path, body, NodeOptions(tick_ms=50, election_ticks=200, seed=1))


def test_a_lone_proposal_goes_out_at_once(tmp_path):
    """Nothing in flight, nothing to wait for: each of a caller's sequential writes is
    sent as soon as it is proposed."""

    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await elected(node, peers)
        for n in range(3):
            put = _put(node, n)
            await wait_until(lambda a=acked: peers.appends_to(B, a), f"put {n}'s append")
            acked = await ack(node, peers, peers.appends_to(B, acked)[-1])
            assert (await put).index == acked

    on_a(tmp_path, body, NodeOptions(tick_ms=50, election_ticks=200, seed=1))


@pytest.mark.parametrize("how", ["a newer leader", "a lost quorum"])
def test_held_proposals_are_refused_at_once_when_leadership_moves(tmp_path, how):
    """Behind a batch that may never apply here nothing waits: once a is no longer the
    leader, what it held is refused as not proposed (NotLeader), which a caller can
    retry elsewhere, rather than timing out as an unknown outcome. Both ways a leader
    goes: a newer term, and stepping down in its own term when its peers stop answering
    (check-quorum, one to two election timeouts after its last ack: 0.6 to 1.2 s here)."""

    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await elected(node, peers)
        first = _put(node, 0)
        await wait_until(lambda: peers.appends_to(B, acked), "the first put's append")
        term = peers.appends_to(B, acked)[0].term
        held = _put(node, 1)
        await asyncio.sleep(0.02)
        assert not held.done()
        if how == "a newer leader":
            peers.answer(Message(MessageType.HEARTBEAT, to=A.id, frm=C.id, term=term + 1))
        with pytest.raises(NotLeader):
            await asyncio.wait_for(held, 3.0)
        assert node._raw.term == (term + 1 if how == "a newer leader" else term)
        # The one in flight was proposed: its outcome waits on the log (c may commit it).
        assert not first.done()
        first.cancel()

    on_a(tmp_path, body, NodeOptions(tick_ms=20, election_ticks=30, seed=1))
