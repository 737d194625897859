"""A vote the store saved, then the tail of its WAL torn (kill -9 and a lying disk):
the store must give the vote back or refuse to open naming the file. Forgetting a vote
it acknowledged would let the member vote twice in one term, and elect two leaders."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coord.raft.types import Entry, HardState
from coord.server.storage.log_store import LogStore, StorageError


def crashed_copy(src: Path, dst: Path) -> Path:
    """The store's files as kill -9 leaves them: copied while it is open, so the WAL
    still holds the last transactions (a clean close would checkpoint it away)."""
    dst.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(src.with_name(src.name + suffix), dst / (src.name + suffix))
    return dst / src.name


@pytest.mark.parametrize("cut", [1000, 1, 4000])
def test_a_vote_in_a_torn_wal_tail_is_remembered_or_refused(tmp_path, cut):
    path = tmp_path / "raft.db"
    with LogStore(path) as store:
        store.save(HardState(term=1, vote=0, commit=0),
                   [Entry(term=1, index=i, data=b"e%d" % i) for i in range(1, 20)])
        store.save(HardState(term=2, vote=3, commit=0), [])  # the vote, acknowledged
        copy = crashed_copy(path, tmp_path / "crashed")
    wal = copy.with_name(copy.name + "-wal")
    size = wal.stat().st_size
    assert size > cut, f"{wal} holds only {size} bytes"
    os.truncate(wal, size - cut)
    try:
        with LogStore(copy) as reopened:
            hard = reopened.load().hard_state
    except StorageError as e:
        assert str(wal) in str(e) and "torn" in str(e), e
        return
    assert (hard.term, hard.vote) == (2, 3), f"the vote was forgotten: {hard}"
