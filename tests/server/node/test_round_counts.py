"""The driver counts the steps of its rounds (turns, Readies, storage hand-offs, saves on
the loop's own thread, write transactions, Raft messages sent and received), and Status
reports them: what `coord bench etcd` divides by its operations. Driven in process on a
one-member cluster, and on member a of three whose peers answer only what the test writes
(`tests.server.held_peers`)."""

from __future__ import annotations

import asyncio
import time

import pytest

from coord.raft.types import Entry, Message, MessageType
from coord.server.api.admin import AdminService
from coord.server.node import proposals as node_proposals
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.proposals import CONCURRENT_WINDOW_S
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine
from tests.clocks import FakeClock
from tests.server.held_peers import SLOW_TICKS, A, B, HeldPeers, ack, elected, on_a
from tests.server.solo_node import leading, on_leader
from tests.server.waits import wait_until

PUTS = 5


def _put(node: Node, n: int) -> asyncio.Task:
    return asyncio.ensure_future(node.propose(encode_command(Put(b"k%d" % n, b"v")), 10.0))


def test_each_lone_put_is_counted_in_turns_readies_and_one_save(tmp_path):
    async def body(node: Node) -> None:
        before = node.round_counts.as_dict()
        for n in range(PUTS):
            await node.propose(encode_command(Put(b"k%d" % n, b"v")))
        after = node.round_counts.as_dict()
        grown = {k: after[k] - before[k] for k in after}
        assert grown["driver_turns"] >= PUTS
        assert grown["readies"] >= PUTS
        # a lone put's entry is made durable on the loop's own thread, not handed to the
        # storage thread and back
        assert grown["inline_saves"] >= PUTS
        assert grown["storage_handoffs"] == 0

    on_leader(tmp_path, body)


def test_a_lone_member_writes_a_put_once_its_commit_index_with_its_entry(tmp_path):
    """A one-member cluster commits an entry the moment it is durable, so its commit
    index is written with the entry, in the same synced transaction: no write for the
    commit alone after it, and the Ready that persists the entry applies it. A member
    killed then would replay the entry (the store says it is committed) before it
    serves."""

    async def run() -> None:
        parts = await leading(tmp_path)
        node = parts.node
        try:
            before = node.round_counts.as_dict()
            for n in range(PUTS):
                applied = await node.propose(encode_command(Put(b"k%d" % n, b"v")))
                assert parts.store.load().hard_state.commit == applied.index
            grown = {k: v - before[k] for k, v in node.round_counts.as_dict().items()}
            assert grown["store_writes"] == PUTS
            assert grown["readies"] == PUTS  # each entry persisted and applied in one
        finally:
            await parts.close()

    asyncio.run(run())


def test_status_reports_the_round_counts(tmp_path):
    async def body(node: Node) -> None:
        await node.propose(encode_command(Put(b"k", b"v")))
        status = AdminService(node, CoordMachine()).status_response()
        assert dict(status.round_counts) == node.round_counts.as_dict()
        assert status.round_counts["readies"] > 0

    on_leader(tmp_path, body)


def test_a_followers_lone_write_is_one_save_on_the_loop_and_one_answer(tmp_path):
    """Member a, a follower of b: an append of one entry, then b's commit notice. a makes
    the entry durable on its own thread and answers it; the notice it applies and does
    not answer (the raft core's choice: the answer would tell b nothing)."""

    async def body(node: Node, peers: HeldPeers) -> None:
        last = node.status().last_index
        term = node.term + 1
        before = node.round_counts.as_dict()
        peers.answer(
            Message(
                MessageType.APP,
                to=A.id,
                frm=B.id,
                term=term,
                log_term=1,
                index=last,
                commit=last,
                entries=(Entry(term=term, index=last + 1),),
            )
        )
        await wait_until(
            lambda: any(m.type == MessageType.APP_RESP and m.index == last + 1 for m in peers.sent),
            "a's ack of the append",
        )
        peers.answer(
            Message(
                MessageType.APP,
                to=A.id,
                frm=B.id,
                term=term,
                log_term=term,
                index=last + 1,
                commit=last + 1,
            )
        )
        await wait_until(lambda: node.applied_index == last + 1, "a's apply of the entry")
        grown = {k: v - before[k] for k, v in node.round_counts.as_dict().items()}
        assert grown["messages_received"] == 2
        assert grown["messages_sent"] == 1
        assert grown["readies"] == 2
        assert grown["inline_saves"] == 1
        assert grown["store_writes"] == 2  # the entry's, synced; the notice's commit index
        assert grown["storage_handoffs"] == 0

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))


class _Puts:
    """Puts on member a, leading b and c, each acknowledged by b: what each grew of a's
    round counts."""

    def __init__(self, node: Node, peers: HeldPeers, acked: int) -> None:
        self.node, self.peers, self.acked = node, peers, acked
        self._n = 0

    def _put(self) -> asyncio.Task:
        self._n += 1
        return _put(self.node, self._n)

    def _grown(self, before: dict[str, int]) -> dict[str, int]:
        return {k: v - before[k] for k, v in self.node.round_counts.as_dict().items()}

    async def lone(self) -> dict[str, int]:
        """One put, alone: nothing in flight when it comes, nothing behind it."""
        before = self.node.round_counts.as_dict()
        put = self._put()
        await wait_until(lambda: self.peers.appends_to(B, self.acked), "a lone put's append")
        self.acked = await ack(self.node, self.peers, self.peers.appends_to(B, self.acked)[-1])
        await put
        return self._grown(before)

    async def burst(self) -> dict[str, int]:
        """A head put, and three that come while its batch is in flight: they wait
        behind it and go out together as the next batch."""
        node, peers = self.node, self.peers
        before = node.round_counts.as_dict()
        head = self._put()
        await wait_until(lambda: peers.appends_to(B, self.acked), "the head put's append")
        [in_flight] = peers.appends_to(B, self.acked)
        behind = [self._put() for _ in range(3)]
        await wait_until(lambda: node.pending_proposals == 4, "the puts behind the head")
        self.acked = await ack(node, peers, in_flight)
        await head
        await wait_until(lambda: peers.appends_to(B, self.acked), "the batch that waited")
        [batch] = peers.appends_to(B, self.acked)
        assert len(batch.entries) == 3
        self.acked = await ack(node, peers, batch)
        await asyncio.gather(*behind)
        return self._grown(before)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """The proposals' monotonic clock stopped until the test moves it: the window after
    a held batch passes when the test says so, however loaded the machine."""
    frozen = FakeClock(time.monotonic())
    monkeypatch.setattr(node_proposals, "time", frozen)
    return frozen


def test_a_batch_callers_waited_behind_is_saved_off_the_loop_as_are_those_soon_after(
    tmp_path, clock
):
    """Member a leads b and c. A lone put's append is made durable on the loop; puts that
    waited behind it go out as the next batch, whose append goes to the storage thread,
    however small (the loop takes in gRPC's next calls meanwhile), as do the appends that
    come within CONCURRENT_WINDOW_S of the last batch held, however many."""

    async def body(node: Node, peers: HeldPeers) -> None:
        puts = _Puts(node, peers, await elected(node, peers))
        first = await puts.lone()
        assert (first["inline_saves"], first["storage_handoffs"]) == (1, 0)

        burst = await puts.burst()
        assert burst["storage_handoffs"] == 1  # the batch that waited
        assert burst["inline_saves"] == 1  # the head put, alone when it came
        for _ in range(20):  # more than a count of sixteen batches would send there
            assert (await puts.lone())["storage_handoffs"] == 1

        clock.now += CONCURRENT_WINDOW_S * 3 / 4
        again = await puts.burst()  # held again: the window runs from here
        assert (again["inline_saves"], again["storage_handoffs"]) == (0, 2)
        clock.now += CONCURRENT_WINDOW_S * 3 / 4
        assert (await puts.lone())["storage_handoffs"] == 1

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))


def test_a_lone_put_once_the_window_has_passed_is_saved_on_the_loop(tmp_path, clock):
    """The window after a held batch is time, not a count of batches: a lone put that
    comes once it has passed is saved on the loop, though no batch came between."""

    async def body(node: Node, peers: HeldPeers) -> None:
        puts = _Puts(node, peers, await elected(node, peers))
        assert (await puts.burst())["storage_handoffs"] == 1

        clock.now += CONCURRENT_WINDOW_S
        last = await puts.lone()
        assert (last["inline_saves"], last["storage_handoffs"]) == (1, 0)

    on_a(tmp_path, body, NodeOptions(**SLOW_TICKS))
