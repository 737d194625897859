"""What the disk is asked to do by saves with and without `sync`, seen in the system
calls of a process that makes them (strace): a synced save fsyncs the WAL, an unsynced
one (a commit index alone) never fsyncs and never checkpoints, however many there are
(an unsynced checkpoint could let the WAL be reused before the database file holds its
frames durably), and the synced saves after it fsync again. A store dropped without
`close()` is checkpointed by whichever of its connections goes last, and that
checkpoint syncs before the WAL is deleted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.etcdtools import require

UNSYNCED = 1_200  # past SQLite's default autocheckpoint of 1,000 WAL pages

WRITER = f"""
import os, sys
from coord.raft.types import Entry, HardState
from coord.server.storage.log_store import LogStore
with LogStore(sys.argv[1]) as store:
    store.save(HardState(1, 0, 0), [Entry(1, i, data=b"e") for i in range(1, 4)])
    os.write(2, b"unsynced\\n")
    for i in range({UNSYNCED}):
        store.save(HardState(1, 0, 1 + i % 3), [], sync=False)
    os.write(2, b"synced\\n")
    store.save(HardState(1, 0, 3), [Entry(1, 4, data=b"e")])
    os.write(2, b"end\\n")
"""


def _phases(trace: str) -> dict[str, list[str]]:
    """The traced calls between the writer's markers, by the marker before them."""
    phases: dict[str, list[str]] = {"open": []}
    current = "open"
    for line in trace.splitlines():
        line = line.split(maxsplit=1)[1]  # after strace -f's pid, padded to its width
        for marker in ("unsynced", "synced", "end"):
            if line.startswith("write(2") and f'"{marker}\\n"' in line:
                current = marker
                phases[current] = []
                break
        else:
            phases[current].append(line)
    return phases


def test_unsynced_saves_neither_fsync_nor_checkpoint_and_synced_ones_fsync(tmp_path: Path):
    strace = require("strace", "`make venv` installs Debian's strace (as root)")
    script, db, log = tmp_path / "writer.py", tmp_path / "raft.db", tmp_path / "strace.log"
    script.write_text(WRITER)
    subprocess.run([strace, "-f", "-y", "-e", "trace=fsync,fdatasync,pwrite64,write",
                    "-o", str(log), sys.executable, str(script), str(db)],
                   check=True, capture_output=True, timeout=120)
    phases = _phases(log.read_text())
    assert set(phases) == {"open", "unsynced", "synced", "end"}, list(phases)

    def syncs(phase: str) -> list[str]:
        return [c for c in phases[phase] if "sync(" in c]

    def writes_to(phase: str, suffix: str) -> list[str]:
        return [c for c in phases[phase] if c.startswith("pwrite64(")
                and f"<{db}{suffix}>" in c]

    assert any(f"<{db}-wal>" in c for c in syncs("open")), "the first synced save"
    assert syncs("unsynced") == []
    assert len(writes_to("unsynced", "-wal")) >= UNSYNCED  # each was written
    assert writes_to("unsynced", "") == []  # and none checkpointed into the database
    assert any(f"<{db}-wal>" in c for c in syncs("synced")), "the synced save after"


DROPPER = """
import gc, os, sys
from coord.raft.types import Entry, HardState
from coord.server.storage.log_store import LogStore
store = LogStore(sys.argv[1])
store.save(HardState(1, 0, 0), [Entry(1, i, data=b"e") for i in range(1, 4)])
store.save(HardState(1, 0, 2), [], sync=False)
os.write(2, b"unsynced\\n")
del store  # not closed: its connections go in the order of its attributes
gc.collect()
os.write(2, b"end\\n")
"""


def test_a_store_dropped_unclosed_syncs_its_last_checkpoint_before_the_wal_goes(
        tmp_path: Path):
    strace = require("strace", "`make venv` installs Debian's strace (as root)")
    script, db, log = tmp_path / "dropper.py", tmp_path / "raft.db", tmp_path / "strace.log"
    script.write_text(DROPPER)
    subprocess.run([strace, "-f", "-y", "-e", "trace=fsync,fdatasync,pwrite64,unlink,write",
                    "-o", str(log), sys.executable, str(script), str(db)],
                   check=True, capture_output=True, timeout=120)
    dropped = _phases(log.read_text())["unsynced"]
    (gone,) = [n for n, c in enumerate(dropped) if c.startswith("unlink(") and "-wal" in c]
    checkpointed = [n for n, c in enumerate(dropped)
                    if c.startswith("pwrite64(") and f"<{db}>" in c]
    assert checkpointed and max(checkpointed) < gone, "the last close checkpoints"
    assert any("sync(" in c and f"<{db}>" in c for c in dropped[max(checkpointed):gone]), \
        "the database was not synced after the checkpoint wrote it, before the WAL went"
