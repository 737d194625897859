"""Which of a leader's messages the node driver asks its transport to write at once
(`PeerTransport.send`'s `at_once`) rather than in the transport's next turn: an append of
entries it is about to fsync, and a read round's heartbeats, but not the empty append that
only carries a new commit index; and everything a follower sends. Driven in process on
member a of three, whose peers answer only what the test writes (`tests.server.held_peers`)."""

from __future__ import annotations

import asyncio

from coord.raft.types import Entry, Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from coord.sm.commands import Put, encode_command
from tests.server.held_peers import SLOW_TICKS, A, B, HeldPeers, ack, elected, on_a
from tests.server.waits import wait_until


def test_appends_and_read_rounds_are_written_at_once_commit_broadcasts_are_not(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await elected(node, peers)

        put = asyncio.ensure_future(node.propose(encode_command(Put(b"k", b"v")), 10.0))
        await wait_until(lambda: peers.appends_to(B, acked), "the append of the put")
        append = peers.appends_to(B, acked)[-1]
        assert any(m is append for m in peers.written_at_once)

        last = await ack(node, peers, append)
        await put
        await wait_until(lambda: any(m.type == MessageType.APP and m.to == B.id
                                     and not m.entries and m.commit >= last
                                     for m in peers.sent), "the commit broadcast")
        broadcast = next(m for m in peers.sent if m.type == MessageType.APP
                         and m.to == B.id and not m.entries and m.commit >= last)
        assert not any(m is broadcast for m in peers.written_at_once)

        read = node.read_barrier(10.0)
        await wait_until(lambda: peers.read_rounds_to(B), "a read round")
        heartbeat = peers.read_rounds_to(B)[-1]
        assert any(m is heartbeat for m in peers.written_at_once)
        peers.answer(Message(MessageType.HEARTBEAT_RESP, to=heartbeat.frm, frm=B.id,
                             term=heartbeat.term, context=heartbeat.context))
        await read

    on_a(tmp_path, body, NodeOptions(read_convoy_ms=0, **SLOW_TICKS))


def test_a_followers_ack_is_written_at_once(tmp_path):
    """What a follower sends after persisting an append (its ack) is what the leader waits
    on to commit: written now, not in the transport's next turn."""

    async def body(node: Node, peers: HeldPeers) -> None:
        last = node.status().last_index
        term = node.term + 1
        peers.answer(Message(MessageType.APP, to=A.id, frm=B.id, term=term,
                             log_term=1, index=last, commit=last,
                             entries=(Entry(term=term, index=last + 1),)))
        await wait_until(lambda: any(m.type == MessageType.APP_RESP and m.index == last + 1
                                     for m in peers.sent), "a's ack of the append")
        assert not node.is_leader and node.leader == B
        ack_ = next(m for m in peers.sent
                    if m.type == MessageType.APP_RESP and m.index == last + 1)
        assert any(m is ack_ for m in peers.written_at_once)

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))
