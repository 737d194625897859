"""Member "a" of a three-member cluster, driven in process: its peers are a transport
that records what a sends and delivers only the answers the test writes. Shared by the
tests of the node driver's batching (group commit, the read convoy)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from coord.raft.types import Message, MessageType
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.members import MemberInfo
from coord.server.storage.log_store import LogStore
from coord.sm.machine import CoordMachine
from tests.server.waits import wait_until

A, B, C = (MemberInfo(n, f"127.0.0.1:{p}") for n, p in (("a", 1), ("b", 2), ("c", 3)))
VOTES = {MessageType.PRE_VOTE: MessageType.PRE_VOTE_RESP, MessageType.VOTE: MessageType.VOTE_RESP}
TEST_TIMEOUT = 30.0
SLOW_TICKS = dict(tick_ms=20_000, election_ticks=10, seed=1)
"""NodeOptions of a tick every 20 s: no election, check-quorum or heartbeat moves during
a test, and nothing wakes the driver but what the test sends and asks."""


class HeldPeers:
    """The peers' side of a's transport: records a's messages, delivers nothing on its own."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.written_at_once: list[Message] = []  # those a asked to be written at once
        self._deliver: Callable[[list[Message]], None] | None = None

    def receive_with(self, deliver: Callable[[list[Message]], None], _unreachable) -> None:
        self._deliver = deliver

    def send(self, messages: Iterable[Message], at_once: bool = False) -> None:
        messages = list(messages)
        self.sent.extend(messages)
        if at_once:
            self.written_at_once.extend(messages)

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
        return [
            m
            for m in self.sent
            if m.type == MessageType.APP
            and m.to == peer.id
            and any(e.index > after for e in m.entries)
        ]

    def read_rounds_to(self, peer: MemberInfo) -> list[Message]:
        """The first heartbeat of each ReadIndex round a started, as `peer` got them (a
        round's heartbeats carry its context; later plain heartbeats repeat it)."""
        firsts: dict[bytes, Message] = {}
        for m in self.sent:
            if m.type == MessageType.HEARTBEAT and m.to == peer.id and m.context:
                firsts.setdefault(m.context, m)
        return list(firsts.values())


async def elected(node: Node, peers: HeldPeers) -> int:
    """Make a the leader with b's vote and commit its first entry with b's ack; returns
    the last index b has acknowledged."""
    node._raw.campaign()
    node._wake.set()
    for kind in (MessageType.PRE_VOTE, MessageType.VOTE):
        await wait_until(lambda k=kind: any(m.type == k for m in peers.sent), kind.name)
        ask = next(m for m in peers.sent if m.type == kind and m.to == B.id)
        peers.answer(Message(VOTES[kind], to=A.id, frm=B.id, term=ask.term))
    await wait_until(lambda: node.is_leader and peers.appends_to(B, 0), "a's first append")
    return await ack(node, peers, peers.appends_to(B, 0)[-1])


async def ack(node: Node, peers: HeldPeers, append: Message) -> int:
    """b acknowledges `append`; returns once a has applied what it carried."""
    last = append.entries[-1].index
    peers.answer(Message(MessageType.APP_RESP, to=A.id, frm=B.id, term=append.term, index=last))
    await wait_until(lambda: node.applied_index >= last, f"a applying index {last}")
    return last


def on_a(
    tmp_path, body: Callable[[Node, HeldPeers], Awaitable[None]], options: NodeOptions
) -> None:
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
