"""The driver counts the steps of its rounds (turns, Readies, storage hand-offs, saves on
the loop's own thread), and Status reports them: what `coord bench etcd` divides by its
operations. Driven on a one-member cluster in process."""

from __future__ import annotations

from coord.server.api.admin import AdminService
from coord.server.node.driver import Node
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine
from tests.server.solo_node import on_leader

PUTS = 5


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


def test_status_reports_the_round_counts(tmp_path):
    async def body(node: Node) -> None:
        await node.propose(encode_command(Put(b"k", b"v")))
        status = AdminService(node, CoordMachine()).status_response()
        assert dict(status.round_counts) == node.round_counts.as_dict()
        assert status.round_counts["readies"] > 0

    on_leader(tmp_path, body)
