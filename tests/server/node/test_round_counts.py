"""The driver counts the steps of its rounds (turns, Readies, storage hand-offs, saves on
the loop's own thread, write transactions, Raft messages sent and received), and Status
reports them: what `coord bench etcd` divides by its operations. Driven in process on a
one-member cluster, and on member a of three whose peers answer only what the test writes
(`tests.server.held_peers`)."""

from __future__ import annotations

import asyncio

from coord.raft.types import Entry, Message, MessageType
from coord.server.api.admin import AdminService
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.proposals import CONCURRENT_BATCHES
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine
from tests.server.held_peers import A, B, HeldPeers, ack, elected, on_a
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

    on_a(tmp_path, body, NodeOptions(tick_ms=20_000, election_ticks=10, seed=1))


def test_a_batch_callers_waited_behind_is_saved_off_the_loop_a_lone_one_on_it(tmp_path):
    """Member a leads b and c. A lone put's append is made durable on the loop; puts that
    waited behind it go out as the next batch, whose append goes to the storage thread,
    however small (the loop takes in gRPC's next calls meanwhile), as do the next
    CONCURRENT_BATCHES batches; after them a lone put is saved on the loop again."""

    async def body(node: Node, peers: HeldPeers) -> None:
        acked = await elected(node, peers)

        def grown(before: dict[str, int]) -> dict[str, int]:
            return {k: v - before[k] for k, v in node.round_counts.as_dict().items()}

        async def lone_put(n: int) -> dict[str, int]:
            nonlocal acked
            before = node.round_counts.as_dict()
            put = _put(node, n)
            await wait_until(lambda: peers.appends_to(B, acked), f"put {n}'s append")
            acked = await ack(node, peers, peers.appends_to(B, acked)[-1])
            await put
            return grown(before)

        first = await lone_put(0)
        assert (first["inline_saves"], first["storage_handoffs"]) == (1, 0)

        before = node.round_counts.as_dict()
        head = _put(node, 1)
        await wait_until(lambda: peers.appends_to(B, acked), "the head put's append")
        [in_flight] = peers.appends_to(B, acked)
        behind = [_put(node, n) for n in range(2, 5)]  # they wait: a batch is in flight
        await wait_until(lambda: node.pending_proposals == 4, "the puts behind the head")
        acked = await ack(node, peers, in_flight)
        await head
        await wait_until(lambda: peers.appends_to(B, acked), "the batch that waited")
        [batch] = peers.appends_to(B, acked)
        assert len(batch.entries) == 3
        acked = await ack(node, peers, batch)
        await asyncio.gather(*behind)
        assert grown(before)["storage_handoffs"] == 1  # the batch that waited
        assert grown(before)["inline_saves"] == 1  # the head put, alone when it came

        for n in range(CONCURRENT_BATCHES - 1):
            assert (await lone_put(100 + n))["storage_handoffs"] == 1
        last = await lone_put(200)
        assert (last["inline_saves"], last["storage_handoffs"]) == (1, 0)

    on_a(tmp_path, body, NodeOptions(tick_ms=50, election_ticks=200, seed=1))
