"""A leader's snapshot arrives as a file the transport already renamed into the snapshot
dir: one Raft refuses (older than what the member has committed) is removed as soon as
Raft has said so, not left (as big as the state) until the next snapshot's sweep or a
restart; one Raft takes is stored and kept. Driven in process: member "a" of a
three-member cluster whose peers are held (`held_peers`), sent snapshots from b."""

from __future__ import annotations

from pathlib import Path

from coord.raft.types import ConfState, Message, MessageType, Snapshot, SnapshotMeta
from coord.server.node.driver import Node, NodeOptions
from coord.server.snapshot_file import SnapshotFile, SnapshotWriter
from coord.server.storage.log_format import members_header
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine
from tests.server.held_peers import A, B, C, HeldPeers, on_a
from tests.server.waits import wait_until

QUIET = NodeOptions(tick_ms=50, election_ticks=200, seed=1)  # a never campaigns


def _leaders_snapshot(node: Node, index: int) -> SnapshotFile:
    """A snapshot file at `index` in a's snapshot dir, as the transport leaves a
    received one: the members, then a state holding one key."""
    machine = CoordMachine()
    machine.apply(1, 1, 0, encode_command(Put(b"k", b"from the leader")))
    writer = SnapshotWriter(node._store.snap_dir, index)
    writer.write(members_header(m.encode() for m in (A, B, C)))
    for piece in machine.capture():
        writer.write(piece)
    return writer.done()


def _snap_from_b(term: int, index: int, data: SnapshotFile) -> Message:
    meta = SnapshotMeta(index=index, term=1, conf_state=ConfState(
        voters=frozenset({A.id, B.id, C.id})))
    return Message(MessageType.SNAP, to=A.id, frm=B.id, term=term,
                   snapshot=Snapshot(meta=meta, data=data))


def _answers_to_b(peers: HeldPeers, term: int) -> list[Message]:
    return [m for m in peers.sent if m.type is MessageType.APP_RESP and m.to == B.id
            and m.term == term]


def _snap_files(node: Node) -> list[Path]:
    return sorted(node._store.snap_dir.glob("*.snap"))


def test_a_refused_snapshots_file_goes_at_once_and_a_taken_ones_stays(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        committed = node.status().commit
        assert committed >= 1, "the bootstrap entries are committed"
        old = _leaders_snapshot(node, committed)
        peers.answer(_snap_from_b(2, committed, old))
        await wait_until(lambda: _answers_to_b(peers, 2), "a's answer to the old snapshot")
        [refused] = _answers_to_b(peers, 2)
        assert refused.index == committed  # Raft refused it: a holds that much already
        assert not old.path.exists(), "a refused snapshot's file stayed on disk"

        new = _leaders_snapshot(node, committed + 10)
        peers.answer(_snap_from_b(3, committed + 10, new))
        await wait_until(lambda: node.applied_index == committed + 10, "a restoring it")
        assert node.status().snapshot_index == committed + 10
        assert _snap_files(node) == [new.path]  # taken: stored, and its file kept

    on_a(tmp_path, body, QUIET)


def test_a_snapshot_still_waiting_when_the_member_stops_is_removed(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        committed = node.status().commit
        waiting = _leaders_snapshot(node, committed + 10)
        peers.answer(_snap_from_b(3, committed + 10, waiting))  # no turn of the driver yet
        await node.stop()
        assert not waiting.path.exists(), "a snapshot nothing will step stayed on disk"

        late = _leaders_snapshot(node, committed + 20)
        peers.answer(_snap_from_b(3, committed + 20, late))
        assert not late.path.exists(), "a snapshot arriving after the stop stayed"
        assert _snap_files(node) == []

    on_a(tmp_path, body, QUIET)


def test_the_snapshots_of_a_step_that_fails_are_removed(tmp_path):
    async def body(node: Node, peers: HeldPeers) -> None:
        committed = node.status().commit
        failing = _leaders_snapshot(node, committed + 10)
        after = _leaders_snapshot(node, committed + 20)
        step = node._raw.step

        def step_failing_on_the_first(m: Message) -> None:
            if m.snapshot is not None and m.snapshot.data is failing:
                raise RuntimeError("planted: stepping this message fails")
            step(m)

        node._raw.step = step_failing_on_the_first
        peers.answer(_snap_from_b(3, committed + 10, failing),
                     _snap_from_b(3, committed + 20, after))
        await wait_until(node.failed.done, "the driver ending on the planted error")
        assert "planted" in str(node.failed.exception())
        assert not failing.path.exists(), "the snapshot whose step failed stayed"
        assert not after.path.exists(), "a snapshot left unstepped stayed"

    on_a(tmp_path, body, QUIET)
