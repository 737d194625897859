"""`coord snapshot restore` reads the backup a block at a time (a backup is as big as the
state): the member's snapshot file it seeds holds the same bytes as ever (the members,
then the backup less its SHA-256), and while it runs it holds no more than the state
it loads to check the backup plus a few blocks, where it held the file whole twice."""

from __future__ import annotations

import argparse
import hashlib
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from coord.cli import snapshot as cli_snapshot
from coord.server.node.members import parse_initial_cluster
from coord.server.snapshot_file import snap_dir
from coord.server.storage.log_format import members_header
from coord.sm.commands import Put, encode_command
from coord.sm.machine import CoordMachine

KEYS = 64
VALUE_BYTES = 64 << 10  # random, so the backup does not compress: 8.7 MB here
BLOCK = 64 << 10  # the backup's read block in this test
CLUSTER = "n1=127.0.0.1:2380,n2=127.0.0.1:2381,n3=127.0.0.1:2382"


def _backup(path: Path) -> bytes:
    """A backup of a state of KEYS random values written to `path`; its snapshot."""
    machine, values = CoordMachine(), random.Random(7)
    for i in range(KEYS):
        machine.apply(i + 1, 1, 0, encode_command(Put(b"k%d" % i, values.randbytes(VALUE_BYTES))))
    body = b"".join(machine.capture())
    path.write_bytes(body + hashlib.sha256(body).digest())
    return body


def _blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            yield block


def _peak(run) -> int:
    """Bytes Python held at most while `run()` ran, beyond what it held before."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        run()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_restore_reads_the_backup_a_block_at_a_time_into_the_same_snapshot_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_snapshot, "READ_BLOCK", BLOCK, raising=False)
    backup = tmp_path / "backup.snap"
    body = _backup(backup)
    size = backup.stat().st_size
    assert size > 64 * BLOCK
    data_dir = tmp_path / "n1"
    args = argparse.Namespace(file=str(backup), name="n1", data_dir=str(data_dir),
                              initial_cluster=CLUSTER, initial_cluster_token="coord")
    loading = _peak(lambda: CoordMachine().restore(_blocks(backup)))
    restoring = _peak(lambda: cli_snapshot.restore(args))

    [seeded] = snap_dir(data_dir).glob("*.snap")
    members = sorted(parse_initial_cluster(CLUSTER), key=lambda m: m.id)
    assert seeded.read_bytes() == members_header(m.encode() for m in members) + body
    # the state it loads to check the backup, plus a few blocks: not the file, even once
    assert restoring - loading < size // 4, (restoring, loading, size)


@pytest.mark.parametrize("damage", ["last byte", "cut short", "tiny"])
def test_a_damaged_backup_is_refused_before_anything_is_written(tmp_path: Path,
                                                                  damage: str) -> None:
    backup = tmp_path / "backup.snap"
    machine = CoordMachine()
    machine.apply(1, 1, 0, encode_command(Put(b"k", b"v")))
    body = b"".join(machine.capture())
    whole = body + hashlib.sha256(body).digest()
    backup.write_bytes({"last byte": whole[:-1] + bytes([whole[-1] ^ 1]),
                        "cut short": whole[:-1], "tiny": whole[:20]}[damage])
    data_dir = tmp_path / "n1"
    args = argparse.Namespace(file=str(backup), name="n1", data_dir=str(data_dir),
                              initial_cluster=CLUSTER, initial_cluster_token="coord")
    with pytest.raises(ValueError, match="SHA-256 does not match"):
        cli_snapshot.restore(args)
    assert not data_dir.exists()


def test_a_backup_replaced_at_its_path_after_its_check_is_not_what_is_read(
        tmp_path: Path) -> None:
    """Restore checks the backup, loads it and writes it in three passes: each reads the
    file it checked, not whatever is at its path by then (another `snapshot save` to the
    same path replaces it), so the member is seeded with the state it described."""
    backup, other = tmp_path / "backup.snap", tmp_path / "other.snap"
    states = []
    for path, value in ((backup, b"checked"), (other, b"replacement")):
        machine = CoordMachine()
        machine.apply(1, 1, 0, encode_command(Put(b"k", value)))
        body = b"".join(machine.capture())
        path.write_bytes(body + hashlib.sha256(body).digest())
        states.append(body)
    with cli_snapshot.verified(backup) as state:
        other.replace(backup)
        assert b"".join(state) == states[0]
