"""etcd's Snapshot call sends the snapshot from its spool file a blob at a time
(`maintenance._sealed`): the blobs are exactly the old whole-in-memory answer (the
snapshot, zero padding to a 512-byte sector, the SHA-256 of both) cut every
SNAPSHOT_CHUNK bytes, whatever the snapshot's size against a blob and a sector."""

from __future__ import annotations

import hashlib
import os

import pytest

from coord.server.etcd import maintenance
from coord.server.transport.snapshot_pieces import Spool

CHUNK = 1024


def whole_then_cut(data: bytes) -> list[bytes]:
    """The answer as it was built in memory."""
    data += b"\0" * (-len(data) % maintenance.SECTOR)
    data += hashlib.sha256(data).digest()
    return [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


@pytest.mark.parametrize("size", [1, 511, 512, 1000, 1024, 1024 - 32, 3 * 1024, 3 * 1024 + 700])
def test_blobs_from_the_spool_are_the_whole_answer_cut(size, monkeypatch, tmp_path):
    monkeypatch.setattr(maintenance, "SNAPSHOT_CHUNK", CHUNK)
    data = os.urandom(size)
    spool = Spool(tmp_path)
    for at in range(0, size, 300):  # written in pieces, as a capture is
        spool.write(data[at:at + 300])
    try:
        blobs = list(maintenance._sealed(spool, -size % maintenance.SECTOR))
    finally:
        spool.clear()
    assert blobs == whole_then_cut(data)
    assert max(map(len, blobs)) <= CHUNK
