"""A member's snapshot file (coord.server.snapshot_file): written a piece at a time, read
back a block at a time with its size and CRC checked, and removed once the log stores a
snapshot as new or newer."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from coord.server import snapshot_file
from coord.server.snapshot_file import SnapshotFile, SnapshotWriter, adopt, sweep


def written(directory: Path, index: int, data: bytes) -> SnapshotFile:
    writer = SnapshotWriter(directory, index)
    for start in range(0, len(data), 1000):
        writer.write(data[start:start + 1000])
    return writer.done()


def test_a_file_reads_back_in_blocks_and_a_damaged_one_is_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_file, "READ_BLOCK", 4096)
    data = os.urandom(10_000)
    snap = written(tmp_path, 7, data)
    assert (snap.index, len(snap), snap.crc) == (7, 10_000, zlib.crc32(data))
    assert [len(b) for b in snap.blocks()] == [4096, 4096, 1808]
    assert b"".join(snap.blocks()) == data
    with open(snap.path, "r+b") as f:
        f.seek(5000)
        f.write(b"\0" * 8)
    with pytest.raises(ValueError, match="damaged"):
        list(snap.blocks())


def test_the_check_comes_before_the_last_block_a_reader_may_stop_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that stops at the block holding the recorded size's end (a zlib stream
    ends inside its last block) still gets the size and CRC checked: damage in the
    bytes zlib's own check does not cover (the member records before the stream), a
    file longer than recorded, or one shorter."""
    monkeypatch.setattr(snapshot_file, "READ_BLOCK", 4096)
    data = os.urandom(10_000)

    def first_three(snap: SnapshotFile) -> list[bytes]:
        blocks = snap.blocks()
        return [next(blocks) for _ in range(3)]  # never asks for a fourth

    snap = written(tmp_path, 7, data)
    assert b"".join(first_three(snap)) == data
    with open(snap.path, "r+b") as f:
        f.write(b"\xff")  # the first byte: in the first block, which was handed out
    with pytest.raises(ValueError, match="damaged: 10000 bytes"):
        first_three(snap)
    snap = written(tmp_path, 8, data)
    with open(snap.path, "ab") as f:
        f.write(b"more")
    with pytest.raises(ValueError, match="damaged: 10004 bytes"):
        first_three(snap)
    snap = written(tmp_path, 9, data)
    os.truncate(snap.path, 9_000)
    with pytest.raises(ValueError, match="damaged: 9000 bytes"):
        list(snap.blocks())


def test_a_discarded_writer_leaves_nothing_and_an_adopted_file_is_renamed(
        tmp_path: Path) -> None:
    writer = SnapshotWriter(tmp_path, 3)
    writer.write(b"half")
    writer.discard()
    assert list(tmp_path.iterdir()) == []
    spool = tmp_path / "snapshot-from-1"
    spool.write_bytes(b"whole")
    snap = adopt(spool, 9, 5, zlib.crc32(b"whole"))
    assert list(tmp_path.iterdir()) == [snap.path] and snap.index == 9
    assert b"".join(snap.blocks()) == b"whole"


def test_sweep_removes_older_files_or_every_other_one(tmp_path: Path) -> None:
    old, kept, twin, newer = (written(tmp_path, i, b"x") for i in (5, 10, 10, 15))
    (tmp_path / "snapshot-from-2").write_bytes(b"a receipt's spool")
    (tmp_path / "notes.snap").write_bytes(b"not one of ours")
    sweep(tmp_path, kept)
    assert not old.path.exists() and not twin.path.exists()
    assert kept.path.exists() and newer.path.exists()
    sweep(tmp_path, kept, everything_else=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [kept.path.name, "snapshot-from-2", "notes.snap"])
    sweep(tmp_path, None, everything_else=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.snap", "snapshot-from-2"]


def test_durable_syncs_the_file_its_dir_and_the_data_dir_holding_that(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot dir is made with the first snapshot: its entry in the data dir must
    be synced as the file's is, or a power loss leaves a log naming a file in a dir that
    is not there."""
    synced: list[Path] = []
    monkeypatch.setattr(snapshot_file, "fsync_dir", synced.append)
    snap = written(tmp_path / "data" / "snap", 4, b"state")
    snap.durable()
    assert synced == [tmp_path / "data" / "snap", tmp_path / "data"]
