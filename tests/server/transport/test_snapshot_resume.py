"""A snapshot transfer cut half way resumes where the receiver's pieces end
(`snapshot_receipt`, `snapshot_pieces.cut`): over a real connection that is cut after a
known number of pieces, and piece by piece for what must start over instead (another
snapshot, a piece that does not continue what is held, a spool damaged on disk)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coord.raft.types import ConfState, Message, MessageType, Snapshot, SnapshotMeta
from coord.server.transport import snapshot_pieces
from coord.server.transport.snapshot_receipt import Outcome, SnapshotReceipt
from tests.server.transport.test_transport import (
    bytes_of,
    connected_pair,
    open_files_under,
    run,
    snapshot_batches,
    snapshot_file,
)
from tests.server.waits import wait_until

PIECE = 1_000
DATA = os.urandom(26 * PIECE - 400)  # 26 pieces, the last one short
CUT_AFTER = 10
NAME = "snapshot-from-1"  # a receipt's spool file


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_pieces, "CHUNK_BYTES", PIECE)


def test_a_transfer_cut_after_ten_pieces_resends_only_the_other_sixteen(
        tmp_path: Path) -> None:
    """The receiver drops the connection after the 10th of 26 pieces; the sender
    reconnects and sends the same snapshot again, as its Raft does after a lost one:
    it writes pieces 11-26 only, and the snapshot arrives whole."""

    async def main() -> None:
        async with connected_pair() as (a, b):
            pieces_in = 0
            deliver = b.transport.inbox.deliver

            def deliver_then_cut(from_id, batch):  # the connection drops after piece 10
                nonlocal pieces_in
                deliver(from_id, batch)
                pieces_in += batch.HasField("chunk")
                if pieces_in == CUT_AFTER:
                    for conn in list(b.transport._inbound):
                        conn.refuse("UNAVAILABLE", "cut by the test")

            b.transport.inbox.deliver = deliver_then_cut
            snap = snapshot_message(tmp_path)
            a.transport.send([snap])
            await wait_until(lambda: a.stats(2)["connects"] == 2 and a.stats(2)["connected"],
                             "the sender to reconnect after the cut")
            held = b.transport.inbox.receipts.held(1)
            assert b.received == [] and held.offset == CUT_AFTER * PIECE
            before = a.stats(2)["batches"]
            a.transport.send([snap])
            await wait_until(lambda: len(b.received) == 1, "the snapshot")
            got = b.received[0].snapshot
            assert got.meta == snap.snapshot.meta and bytes_of(got.data) == DATA
            assert pieces_in == 26
            assert a.stats(2)["batches"] - before == 26 - CUT_AFTER
            assert b.transport.inbox.dropped == 0 and b.transport.inbox.receipts.held(1) is None

    run(main())


def snapshot_message(directory: Path) -> Message:
    meta = SnapshotMeta(index=9, term=3, conf_state=ConfState(voters=frozenset({1, 2})))
    return Message(MessageType.SNAP, to=2, frm=1, term=3,
                   snapshot=Snapshot(meta=meta, data=snapshot_file(directory, DATA)))


def held_after(receipt: SnapshotReceipt, batches: list) -> None:
    for batch in batches:
        assert receipt.add(batch.chunk) is Outcome.KEPT


def test_the_sender_resumes_only_from_a_start_of_the_same_snapshot(tmp_path: Path) -> None:
    receipt = SnapshotReceipt(tmp_path, NAME)
    held_after(receipt, snapshot_batches(DATA)[:CUT_AFTER])
    held = receipt.held()
    assert (held.index, held.total, held.offset) == (9, len(DATA), CUT_AFTER * PIECE)
    resumed = snapshot_batches(DATA, held=held)
    assert len(resumed) == 26 - CUT_AFTER and resumed[0].chunk.offset == held.offset
    for batch in resumed[:-1]:
        assert receipt.add(batch.chunk) is Outcome.KEPT
    assert receipt.add(resumed[-1].chunk) is Outcome.COMPLETE
    assert bytes_of(receipt.take()) == DATA
    other = bytes(reversed(DATA))  # same index, term and size; other bytes: the CRC differs
    assert len(snapshot_batches(other, held=held)) == 26
    assert len(snapshot_batches(DATA, index=10, held=held)) == 26


def test_a_newer_snapshot_replaces_what_is_held(tmp_path: Path) -> None:
    receipt = SnapshotReceipt(tmp_path, NAME)
    held_after(receipt, snapshot_batches(DATA)[:CUT_AFTER])
    newer = snapshot_batches(DATA[::-1], index=10)
    assert receipt.add(newer[0].chunk) is Outcome.KEPT
    assert (receipt.held().index, receipt.held().offset) == (10, PIECE)
    assert open_files_under(tmp_path) == 1  # the old spool went
    old = snapshot_batches(DATA)[CUT_AFTER]  # the old transfer's next piece: refused
    assert receipt.add(old.chunk) is Outcome.DROPPED and receipt.held() is None
    assert open_files_under(tmp_path) == 0


def test_a_piece_that_does_not_follow_what_is_held_drops_it(tmp_path: Path) -> None:
    receipt = SnapshotReceipt(tmp_path, NAME)
    batches = snapshot_batches(DATA)
    held_after(receipt, batches[:CUT_AFTER])
    bad = batches[CUT_AFTER]
    bad.chunk.crc ^= 1
    assert receipt.add(bad.chunk) is Outcome.DROPPED and receipt.held() is None


def test_a_spool_damaged_on_disk_is_caught_and_the_next_transfer_starts_clean(
        tmp_path: Path) -> None:
    receipt = SnapshotReceipt(tmp_path, NAME)
    batches = snapshot_batches(DATA)
    held_after(receipt, batches[:-1])
    spool = receipt._spool._file
    assert spool is not None
    os.pwrite(spool.fileno(), b"\0" * 8, 3 * PIECE)  # bytes flipped under the spool
    assert receipt.add(batches[-1].chunk) is Outcome.CORRUPT
    assert receipt.take() is None and receipt.held() is None
    assert open_files_under(tmp_path) == 0 and list(tmp_path.iterdir()) == []
    held_after(receipt, batches[:-1])
    assert receipt.add(batches[-1].chunk) is Outcome.COMPLETE
    assert bytes_of(receipt.take()) == DATA


def test_a_restarted_receiver_resumes_from_its_spool_file_unless_it_fails_its_crc(
        tmp_path: Path) -> None:
    """In a data dir the receipt is a named spool plus what it holds: a member that
    stopped mid-transfer (its receipts closed, or the process killed: the files stay)
    resumes from them; bytes damaged meanwhile, or a spool cut shorter than what it
    said it held, drop both files and the next transfer starts from byte 0."""
    name = NAME
    batches = snapshot_batches(DATA)
    first = SnapshotReceipt(tmp_path, name)
    held_after(first, batches[:CUT_AFTER])
    before = first.held()
    first.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, name + ".held"]
    again = SnapshotReceipt(tmp_path, name)
    assert again.held() == before
    for batch in snapshot_batches(DATA, held=again.held())[:-1]:
        assert again.add(batch.chunk) is Outcome.KEPT
    assert again.add(batches[-1].chunk) is Outcome.COMPLETE
    taken = again.take()
    assert bytes_of(taken) == DATA
    assert list(tmp_path.iterdir()) == [taken.path]  # the spool became the snapshot file
    taken.remove()

    for damage in ("flip", "cut"):
        first = SnapshotReceipt(tmp_path, name)
        held_after(first, batches[:CUT_AFTER])
        first.close()
        with open(tmp_path / name, "r+b") as f:
            if damage == "flip":
                f.seek(5 * PIECE)
                f.write(b"\0" * 8)
            else:
                f.truncate(5 * PIECE)
        again = SnapshotReceipt(tmp_path, name)
        assert again.held() is None, damage
        assert list(tmp_path.iterdir()) == [], damage
        assert len(snapshot_batches(DATA, held=again.held())) == 26


def test_a_snapshot_file_damaged_on_disk_is_not_passed_on(tmp_path: Path) -> None:
    """The leader's snapshot file changed on disk after it was recorded: the sender reads
    every piece, finds the whole's CRC-32 is not the recorded one before the last piece
    goes, drops the snapshot and reports the follower unreachable (its Raft sends a
    snapshot again), so the follower never installs the damaged bytes."""

    async def main() -> None:
        async with connected_pair() as (a, b):
            snap = snapshot_message(tmp_path)
            with open(snap.snapshot.data.path, "r+b") as f:
                f.seek(12_345)
                f.write(b"\0")
            a.transport.send([snap])
            await wait_until(lambda: a.unreachable == [2], "the snapshot dropped")
            assert a.stats(2)["batches"] == 25  # all but the last
            # the receiver takes in the pieces already sent at its own pace (a busy
            # machine: the sender can report the drop while 9 are still in flight)
            receipts = b.transport.inbox.receipts
            await wait_until(lambda: getattr(receipts.held(1), "offset", 0) == 25 * PIECE,
                             "the receiver to hold the 25 pieces sent")
            assert b.received == []  # the damaged whole never installed
            assert open_files_under(tmp_path) == 0  # the file closed with the transfer

    run(main())
