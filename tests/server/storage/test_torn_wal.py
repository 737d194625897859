"""A vote the store saved, then the tail of its WAL torn (kill -9 and a lying disk):
the store must give the vote back or refuse to open naming the file. Forgetting a vote
it acknowledged would let the member vote twice in one term, and elect two leaders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coord.raft.types import Entry, HardState
from coord.server.storage.log_store import LogStore, StorageError
from tests.etcdtools import require


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


WRITER = """
import sys
from coord.raft.types import Entry, HardState
from coord.server.storage.log_store import LogStore
with LogStore(sys.argv[1]) as store:
    store.save(HardState(term=1, vote=0, commit=0),
               [Entry(term=1, index=i, data=b"e%d" % i) for i in range(1, 20)])
    store.save(HardState(term=2, vote=3, commit=0), [])  # acknowledged
    store.save(HardState(term=3, vote=1, commit=0), [])  # killed mid-frame
"""


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def _last_wal_write(strace: str, script: Path, db: Path, log: Path) -> int:
    """The number (1-based, among the writer's pwrite64 calls) of its last write to the WAL:
    the page of the last save's last frame, which SQLite writes after that frame's header."""
    _run([strace, "-f", "-y", "-e", "trace=pwrite64", "-o", str(log),
          sys.executable, str(script), str(db)], check=True)
    writes = [line for line in log.read_text().splitlines() if "pwrite64(" in line]
    wal = [n for n, line in enumerate(writes, 1) if f"<{db}-wal>" in line]
    assert wal, f"no write to {db}-wal in {log}"
    page = writes[wal[-1] - 1]
    assert page.rstrip().endswith("= 4096"), page  # a page, not a frame header
    return wal[-1]


def test_a_writer_killed_between_a_frame_s_header_and_its_page_starts_again(tmp_path):
    """kill -9 between SQLite's two writes of one frame (strace's syscall fault injection
    kills the writer as it enters the page's write, which never happens) leaves a frame
    header past the WAL's last whole frame. Its transaction never reached its fsync, so it
    was never acknowledged: the store opens with the acknowledged vote and without it,
    instead of refusing as it does a torn page above."""
    strace = require("strace", "`make venv` installs Debian's strace (as root)")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    n = _last_wal_write(strace, script, tmp_path / "dry.db", tmp_path / "dry.log")
    db = tmp_path / "raft.db"
    killed = _run([strace, "-f", "-o", os.devnull, "-e", "trace=pwrite64", "-e",
                   f"inject=pwrite64:error=EIO:signal=SIGKILL:when={n}",
                   sys.executable, str(script), str(db)])
    # strace dies of the signal its tracee died of
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    wal = db.with_name(db.name + "-wal")
    frame = 24 + 4096
    assert (wal.stat().st_size - 32) % frame == 24, "the kill did not leave a lone header"
    with LogStore(db) as reopened:
        hard = reopened.load().hard_state
    assert (hard.term, hard.vote) == (2, 3), hard
