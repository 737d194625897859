"""The deterministic cluster simulator (coord.rafttest) over a few hundred seeds, and
proof that its checker can fail: with the core deliberately broken it reports violations.

Each test runs a chunk of seeds; a failure names the seed, the broken invariant and the
command that replays it with a trace (``python -m coord.rafttest --seed S --nodes N -v``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict

import pytest

from coord.raft import raft as raft_module
from coord.raft.types import Message, MessageType, Ready
from coord.rafttest import InvariantViolation, Simulation, run
from coord.rafttest.cli import main

CHUNK = 20
SEEDS_3 = 200
SEEDS_5 = 100


def run_chunk(nodes: int, first: int) -> None:
    for seed in range(first, first + CHUNK):
        try:
            run(seed, nodes)
        except InvariantViolation as v:
            pytest.fail(str(v), pytrace=False)


def chunk_id(first: int) -> str:
    return f"seeds{first}-{first + CHUNK - 1}"


@pytest.mark.parametrize("first", range(0, SEEDS_3, CHUNK), ids=chunk_id)
def test_three_nodes(first: int) -> None:
    run_chunk(3, first)


@pytest.mark.parametrize("first", range(0, SEEDS_5, CHUNK), ids=chunk_id)
def test_five_nodes(first: int) -> None:
    run_chunk(5, first)


def test_a_seed_replays_identically() -> None:
    a, b = run(7, 3), run(7, 3)
    assert a == b
    assert a.committed > 3 and a.leaders >= 1


def test_runs_exercise_the_interesting_paths() -> None:
    """Guard against a simulator that silently stopped injecting faults or workload."""
    total: Counter[str] = Counter()
    for seed in range(20):
        for nodes in (3, 5):
            total.update(asdict(run(seed, nodes)))
    for key in ("crashes", "torn_readies", "snapshots_restored", "conf_changes", "transfers",
                "partitions", "reads_served", "acked", "dropped", "leaders"):
        assert total[key] > 0, key


# -- the checker can fail ------------------------------------------------------------------


def _grant_every_vote(self: raft_module.Raft, m: Message) -> None:
    """A broken voter: grants every (pre-)vote, whatever its own vote and log say."""
    resp = MessageType.VOTE_RESP if m.type is MessageType.VOTE else MessageType.PRE_VOTE_RESP
    self._send(Message(resp, to=m.frm, term=m.term))
    if m.type is MessageType.VOTE:
        self.election_elapsed = 0
        self.vote = m.frm


def _answer_reads_at_once(self: raft_module.Raft, m: Message) -> None:
    """A broken leader: serves ReadIndex from its commit index without confirming that it
    still leads."""
    self._answer_read(m, self.log.committed)


def violations(nodes: int, seeds: range, invariant: str | None = None) -> list[InvariantViolation]:
    """Run seeds until one breaks `invariant` (any, if None); every violation seen so far."""
    found = []
    for seed in seeds:
        try:
            run(seed, nodes)
        except InvariantViolation as v:
            found.append(v)
            if invariant is None or v.invariant == invariant:
                break
    return found


@pytest.mark.parametrize("nodes", [3, 5])
def test_broken_voting_is_caught(monkeypatch: pytest.MonkeyPatch, nodes: int) -> None:
    monkeypatch.setattr(raft_module.Raft, "_handle_vote_request", _grant_every_vote)
    found = violations(nodes, range(6))
    assert found, "a core that grants every vote passed the simulator"
    v = found[0]
    assert v.invariant in {"election safety", "leader completeness", "log matching",
                           "state machine safety", "durability"}
    text = str(v)
    assert f"seed {v.seed}" in text
    assert f"python -m coord.rafttest --seed {v.seed} --nodes {nodes} -v" in text


def test_broken_read_index_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raft_module.Raft, "_leader_read_index", _answer_reads_at_once)
    found = violations(5, range(40), "linearizable read")
    assert found and found[-1].invariant == "linearizable read", [str(v) for v in found]


def test_a_vote_written_without_fsync_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every simulated crash is a power loss: a driver that fsyncs only for new entries
    and snapshots (not for a new term or vote) loses votes and double-votes."""
    monkeypatch.setattr(Ready, "must_sync",
                        property(lambda rd: bool(rd.entries) or rd.snapshot is not None))
    found = violations(5, range(60), "election safety")
    assert found and found[-1].invariant == "election safety", [str(v) for v in found]


def test_replay_prints_a_trace_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(raft_module.Raft, "_handle_vote_request", _grant_every_vote)
    v = violations(3, range(6))[0]
    assert main(["--seed", str(v.seed), "--nodes", "3", "-v"]) == 1
    out, err = capsys.readouterr()
    assert "is leader in term" in out and f"VIOLATION {v.invariant}" in out
    assert f"replay: python -m coord.rafttest --seed {v.seed} --nodes 3 -v" in err
    assert main(["--start", str(v.seed), "--seeds", "1", "--nodes", "3"]) == 1
    out, _ = capsys.readouterr()
    assert "1 failed" in out


def test_simulation_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Simulation(0, nodes=0)
