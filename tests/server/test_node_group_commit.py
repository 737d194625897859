"""Group commit in the node driver: a leader proposes the next batch only once its last
one has applied, so proposals that arrive one by one while a batch is in flight go out
together. Driven in process: member "a" of a three-member cluster, whose peers are a
transport that records what a sends and delivers only the answers the test writes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import pytest

from coord.raft.types import Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.errors import NotLeader
from coord.server.node.members import MemberInfo
from coord.server.storage.log_store import LogStore
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine
from tests.server.waits import wait_until

A, B, C = (MemberInfo(n, f"127.0.0.1:{p}") for n, p in (("a", 1), ("b", 2), ("c", 3)))
VOTES = {MessageType.PRE_VOTE: MessageType.PRE_VOTE_RESP, MessageType.VOTE: MessageType.VOTE_RESP}
TEST_TIMEOUT = 30.0


class HeldPeers:
    """The peers' side of a's transport: records a's messages, delivers nothing on its own."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._deliver: Callable[[list[Message]], None] | None = None

    def receive_with(self, deliver: Callable[[list[Message]], None], _unreachable) -> None:
        self._deliver = deliver

    def send(self, messages: Iterable[Message]) -> None:
        self.sent.extend(messages)

    def answer(self, *messages: Message) -> None:
        assert self._deliver is not None
        self._deliver(list(messages))

    def stats(self) -> dict[int, dict]:
        return {}

    def set_peer(self, node_id: int, address: str) -> None:
        pass

    def remove_peer(self, node_id: int) -> None:
        pass

    def appends_to(self, peer: MemberInfo, after: int) -> list[Message]:
        """a's appends to `peer` that carry entries past index `after`."""
        return [m for m in self.sent if m.type == MessageType.APP and m.to == peer.id
                and any(e.index > after for e in m.entries)]


async def _elected(node: Node, peers: HeldPeers) -> int:
    """Make a the leader with b's vote and commit its first entry with b's ack; returns
    the last index b has acknowledged."""
    node._raw.campaign()
    node._wake.set()
    for kind in (MessageType.PRE_VOTE, MessageType.VOTE):
        await wait_until(lambda k=kind: any(m.type == k for m in peers.sent), kind.name)
        ask = next(m for m in peers.sent if m.type == kind and m.to == B.id)
        peers.answer(Message(VOTES[kind], to=A.id, frm=B.id, term=ask.term))
    await wait_until(lambda: node.is_leader and peers.appends_to(B, 0), "a's first append")
    return await _ack(node, peers, peers.appends_to(B, 0)[-1])


async def _ack(node: Node, peers: HeldPeers, append: Message) -> int:
    """b acknowledges `append`; returns once a has applied what it carried."""
    last = append.entries[-1].index
    peers.answer(Message(MessageType.APP_RESP, to=A.id, frm=B.id, term=append.term, index=last))
    await wait_until(lambda: node.applied_index >= last, f"a applying index {last}")
    return last


def _on_a(tmp_path, body: Callable[[Node, HeldPeers], Awaitable[None]],
          options: NodeOptions) -> None:
    """Run `body(node, peers)` on member a, with its peers held, then stop it."""

    async def run() -> None:
        peers = HeldPeers()
        store = LogStore(tmp_path / "raft.db")
        node = Node(A, store, peers, CoordMachine(), [A, B, C], 7, options)
        await node.start()
        try:
            await body(node, peers)
        finally:
            await node.stop()
            store.close()

    asyncio.run(asyncio.wait_for(run(), TEST_TIMEOUT))


def _put(node: Node, n: int) -> asyncio.Task:
    return asyncio.ensure_future(node.propose(encode_command(Put(b"k%d" % n, b"v")), 10.0))


def test_proposals_arriving_while_a_batch_is_in_flight_go_out_as_one_batch(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await _elected(node, peers)
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

        await _ack(node, peers, in_flight)
        assert (await first).index == acked + 1
        await wait_until(lambda: peers.appends_to(B, acked + 1), "the next batch")
        [batch] = peers.appends_to(B, acked + 1)
        assert [e.index for e in batch.entries] == list(range(acked + 2, acked + 7))

        await _ack(node, peers, batch)
        assert sorted(a.index for a in await asyncio.gather(*later)) == list(
            range(acked + 2, acked + 7))

    _on_a(tmp_path, body, NodeOptions(tick_ms=50, election_ticks=200, seed=1))


def test_a_lone_proposal_goes_out_at_once(tmp_path):
    """Nothing in flight, nothing to wait for: each of a caller's sequential writes is
    sent as soon as it is proposed."""

    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await _elected(node, peers)
        for n in range(3):
            put = _put(node, n)
            await wait_until(lambda a=acked: peers.appends_to(B, a), f"put {n}'s append")
            acked = await _ack(node, peers, peers.appends_to(B, acked)[-1])
            assert (await put).index == acked

    _on_a(tmp_path, body, NodeOptions(tick_ms=50, election_ticks=200, seed=1))


@pytest.mark.parametrize("how", ["a newer leader", "a lost quorum"])
def test_held_proposals_are_refused_at_once_when_leadership_moves(tmp_path, how):
    """Behind a batch that may never apply here nothing waits: once a is no longer the
    leader, what it held is refused as not proposed (NotLeader), which a caller can
    retry elsewhere, rather than timing out as an unknown outcome. Both ways a leader
    goes: a newer term, and stepping down in its own term when its peers stop answering
    (check-quorum, one to two election timeouts after its last ack: 0.6 to 1.2 s here)."""

    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await _elected(node, peers)
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

    _on_a(tmp_path, body, NodeOptions(tick_ms=20, election_ticks=30, seed=1))
