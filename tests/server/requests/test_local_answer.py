"""A write's result on a one-member cluster, in process: the leader's own proposer gets
the very result its machine made (no bytes decoded); what it forwards to a follower is
those bytes, which decode to an equal result there; a retried request id is answered
from the memory's bytes, decoded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coord.server.forward.service import ForwardService
from coord.server.node.driver import Node, NodeOptions
from coord.server.requests.coordinator import Coordinator
from coord.sm import commands as c
from coord.sm import results
from coord.sm.machine import CoordMachine
from coord.v1 import coord_pb2 as pb
from tests.server.solo_node import SOLO, on_leader


def _on_leader(tmp_path, body) -> None:
    """Run `body(node, machine, made)` on a fresh one-member leader; `made` lists the
    results its machine dispatched, in order."""
    machine = CoordMachine()
    made: list = []
    dispatch = machine._dispatch
    machine._dispatch = lambda cmd, now: made.append(dispatch(cmd, now)) or made[-1]
    on_leader(tmp_path, lambda node: body(node, machine, made), machine)


def test_a_local_write_gets_the_value_its_machine_made(tmp_path, monkeypatch):
    async def body(node: Node, machine: CoordMachine, made: list) -> None:
        coord = Coordinator(node, machine, link=None)
        monkeypatch.setattr(results, "decode_result", pytest.fail)  # nothing decoded
        put = await coord.write(c.Put(b"k", b"v", prev_kv=True, request_id="put-1"))
        assert put is made[-1] and put.revision == machine.revision

    _on_leader(tmp_path, body)


def test_forwarded_and_remembered_answers_round_trip(tmp_path):
    async def body(node: Node, machine: CoordMachine, made: list) -> None:
        cmd = c.Put(b"k", b"v", request_id="put-2")
        # the leader's side of a forwarded command: the answer's bytes, once
        service = ForwardService(node, tracker=None, auth=None)
        outcome = await service._outcome(pb.ForwardProposal(
            id=1, command=c.encode_command(cmd), timeout_ms=5_000))
        assert not outcome.HasField("error")
        leader_made = made[-1]

        class _Link:  # a follower's link to this leader: the outcome above
            async def propose(self, leader, payload: bytes, timeout: float):
                return outcome.result, outcome.index

        follower = SimpleNamespace(options=NodeOptions(), me=SimpleNamespace(name="n2"),
                                   term=1, is_leader=False, leader=SOLO,
                                   quorum_lost_for=lambda: 0.0)
        forwarded = await Coordinator(follower, CoordMachine(), _Link()).write(cmd)
        assert forwarded == leader_made and forwarded is not leader_made
        # the same request id again on the leader: not applied twice, answered from
        # the bytes remembered with it
        again = await Coordinator(node, machine, link=None).write(cmd)
        assert len(made) == 1 + made.index(leader_made)  # nothing dispatched since
        assert again == leader_made and again is not leader_made

    _on_leader(tmp_path, body)
