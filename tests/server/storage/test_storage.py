"""Tests for coord.server.storage: the writer's durability, log rewriting and load-time
validation, and the read-only reader reading back what a real member wrote."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

import coord.testing
from coord.client import Client
from coord.raft.types import ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMeta
from coord.server import failpoints
from coord.server.snapshot_file import SnapshotWriter, snap_dir
from coord.server.storage import log_store
from coord.server.storage.log_format import db_path
from coord.server.storage.log_reader import LogReader
from coord.server.storage.log_store import LogStore, PersistedState, StorageError


def ents(lo: int, hi: int, term: int = 1, tag: bytes = b"") -> list[Entry]:
    """Entries lo..hi-1, all at `term`, with payloads that identify them."""
    return [Entry(term=term, index=i, data=tag + b"e%d" % i) for i in range(lo, hi)]


def snap(db: Path, index: int, term: int, data: bytes = b"state") -> Snapshot:
    """A snapshot at `index`, its `data` written to a file in `db`'s snapshot dir."""
    conf = ConfState(voters=frozenset({1, 2, 3}), learners=frozenset({7}))
    writer = SnapshotWriter(snap_dir(db.parent), index)
    writer.write(data)
    return Snapshot(meta=SnapshotMeta(index=index, term=term, conf_state=conf),
                    data=writer.done())


def reopen(path: Path) -> PersistedState:
    with LogStore(path) as store:
        return store.load()


def raw(path: Path, *statements: str) -> None:
    """Edit the file behind the store's back, as a crash or an operator might."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "raft.db"


def test_fresh_store_is_empty_and_creates_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "raft.db"
    with LogStore(path) as store:
        assert store.path == path
        assert store.load() == PersistedState(HardState(), Snapshot(), [])
    assert path.is_file()
    assert reopen(path) == PersistedState(HardState(), Snapshot(), [])


def test_round_trip(db: Path) -> None:
    entries = [
        Entry(term=1, index=1, type=EntryType.CONF_CHANGE, data=b"\x00conf"),
        *ents(2, 50, term=1),
        *ents(50, 60, term=3),
        Entry(term=3, index=60, data=b""),
    ]
    hs = HardState(term=3, vote=2, commit=55)
    store = LogStore(db)
    store.save(hs, entries)
    store.close()

    state = reopen(db)
    assert state == PersistedState(hard_state=hs, snapshot=Snapshot(), entries=entries)
    assert state.entries[0].type is EntryType.CONF_CHANGE
    assert isinstance(state.entries[0].data, bytes)


def test_save_batches_accumulate_and_hard_state_is_replaced(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, vote=1, commit=0), ents(1, 4))
        store.save(None, ents(4, 8))
        store.save(HardState(term=2, vote=0, commit=7), [])
    state = reopen(db)
    assert state.entries == ents(1, 8)
    assert state.hard_state == HardState(term=2, vote=0, commit=7)


def test_save_of_1000_entries_is_one_transaction(db: Path) -> None:
    with LogStore(db) as store:
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)  # white box: count transactions
        store.save(HardState(term=1, commit=1000), ents(1, 1001))
        store._conn.set_trace_callback(None)
        assert [s for s in statements if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"]
        assert [s for s in statements if s == "COMMIT"] == ["COMMIT"]
    assert reopen(db).entries == ents(1, 1001)


def test_an_append_reads_and_deletes_nothing(db: Path) -> None:
    """The store knows where its log ends: a lone entry after the last is three
    statements, a commit index alone one (autocommit), on the connection kept for
    unsynced writes (none on the synced one), and a reopened store learns the ends from
    the file."""
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 3))
    with LogStore(db) as store:
        store.save(None, ents(3, 4))  # the first write of a store reads its ends
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)  # white box: count statements
        store.save(None, ents(4, 5))
        store._conn.set_trace_callback(None)
        assert [s.split()[0] for s in statements] == ["BEGIN", "INSERT", "COMMIT"]
        statements.clear()
        unsynced: list[str] = []
        store._conn.set_trace_callback(statements.append)
        store._unsynced_connection().set_trace_callback(unsynced.append)
        store.save(HardState(term=1, commit=4), [], sync=False)  # a commit index alone
        store._conn.set_trace_callback(None)
        store._unsynced_connection().set_trace_callback(None)
        assert statements == []
        assert len(unsynced) == 1 and unsynced[0].startswith("INSERT INTO hard_state")
        with pytest.raises(ValueError, match="term 0, below term 1 of entry 4"):
            store.save(None, [Entry(term=0, index=5)])
    assert reopen(db).entries == ents(1, 5)


def test_suffix_overwrite(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=3), ents(1, 11, term=1))
        # A new leader at term 2 replaces 6..10 with a shorter, different suffix.
        new = ents(6, 8, term=2, tag=b"new")
        store.save(HardState(term=2, commit=3), new)
        assert store.entries(1, 100) == ents(1, 6, term=1) + new
    assert reopen(db).entries == ents(1, 6, term=1) + new


def test_compact_removes_covered_entries(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=2, commit=20), ents(1, 11, term=1) + ents(11, 21, term=2))
        first = snap(db, 15, 2)
        store.compact(first)
        assert store.entries(0, 100) == ents(16, 21, term=2)
    state = reopen(db)
    assert state.snapshot == first
    assert state.snapshot.meta.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({7}))
    assert state.entries == ents(16, 21, term=2)
    assert state.hard_state.commit == 20

    # Compacting again replaces the snapshot (and removes the older one's file);
    # compacting everything leaves no entries.
    with LogStore(db) as store:
        newer = snap(db, 20, 2, data=b"newer")
        store.compact(newer)
    state = reopen(db)
    assert state.snapshot == newer
    assert state.entries == []
    assert not first.data.path.exists() and newer.data.path.read_bytes() == b"newer"


def test_snapshot_via_save_with_entries_after_it(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=2), ents(1, 6, term=1))
        # The leader sends a snapshot at 100 (our log is far behind), then entries after it.
        sent = snap(db, 100, 4)
        store.save(HardState(term=4, vote=3, commit=102), ents(101, 104, term=4), sent)
    state = reopen(db)
    assert state.snapshot == sent
    assert state.entries == ents(101, 104, term=4)
    assert state.hard_state == HardState(term=4, vote=3, commit=102)


def test_snapshot_drops_a_diverged_suffix_but_keeps_a_matching_one(db: Path) -> None:
    with LogStore(db) as store:
        store.save(None, ents(1, 11, term=1))
        # Our entry 5 has term 1, the snapshot says term 2: 6..10 cannot extend it.
        store.save(HardState(term=2, commit=5), [], snap(db, 5, 2))
        assert store.entries(0, 100) == []
        store.save(None, ents(6, 11, term=2))
        # Entry 8 matches (term 2), so 9..10 survive.
        store.save(None, [], snap(db, 8, 2))
        assert store.entries(0, 100) == ents(9, 11, term=2)
    assert reopen(db).entries == ents(9, 11, term=2)


def test_bad_batches_are_rejected_without_writing(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=5), ents(1, 11))
        stored = snap(db, 5, 1)
        store.compact(stored)
        with pytest.raises(ValueError, match="gap"):
            store.save(None, ents(12, 14))
        with pytest.raises(ValueError, match="not contiguous"):
            store.save(None, [Entry(term=1, index=11), Entry(term=1, index=13)])
        with pytest.raises(ValueError, match="snapshot"):
            store.save(None, ents(3, 8))
        with pytest.raises(ValueError, match="term"):
            store.save(None, [Entry(term=0, index=11)])
        with pytest.raises(ValueError, match="commit index 11"):
            store.save(HardState(term=1, commit=11), [])
        with pytest.raises(ValueError, match="older"):
            store.compact(snap(db, 4, 1))
        # The failed batches left nothing behind, not even half a batch.
        with pytest.raises(ValueError, match="commit index 99"):
            store.save(HardState(term=1, commit=99), ents(11, 13))
        assert store.entries(0, 100) == ents(6, 11)
        # ...and the store does not believe they were: its log still ends at 10.
        with pytest.raises(ValueError, match="gap after last index 10"):
            store.save(None, ents(13, 14))
    state = reopen(db)
    assert state.entries == ents(6, 11)
    assert state.hard_state == HardState(term=1, commit=5)
    assert state.snapshot == stored


def test_meta_round_trip(db: Path) -> None:
    with LogStore(db) as store:
        assert store.get_meta("cluster_id") is None
        store.set_meta("cluster_id", "c-1")
        store.set_meta("node_id", "3")
        store.set_meta("cluster_id", "c-2 ünïcode")
        assert store.get_meta("cluster_id") == "c-2 ünïcode"
    with LogStore(db) as store:
        assert store.get_meta("cluster_id") == "c-2 ünïcode"
        assert store.get_meta("node_id") == "3"
        assert store.get_meta("missing") is None


def test_entries_range_is_half_open(db: Path) -> None:
    with LogStore(db) as store:
        store.save(None, ents(1, 21))
        assert store.entries(5, 9) == ents(5, 9)
        assert store.entries(20, 30) == ents(20, 21)
        assert store.entries(9, 9) == []


def test_empty_save_does_nothing(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=3), ents(1, 4))
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)  # white box: no transaction at all
        store.save(None, [])
        store.save(None, (), Snapshot())
        store._conn.set_trace_callback(None)
        assert statements == []
        # Also black box: with another connection holding the write lock, an empty save
        # must return at once instead of waiting for the lock (and failing).
        other = sqlite3.connect(db, isolation_level=None, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            store.save(None, [])
            other.execute("ROLLBACK")
        finally:
            other.close()
    assert reopen(db) == PersistedState(HardState(term=1, commit=3), Snapshot(), ents(1, 4))


def test_data_survives_process_kill(db: Path) -> None:
    code = textwrap.dedent(
        f"""
        import os
        from coord.raft.types import Entry, HardState
        from coord.server.storage.log_store import LogStore
        store = LogStore({str(db)!r})
        entries = [Entry(term=2, index=i, data=b"x%d" % i) for i in range(1, 501)]
        store.save(HardState(term=2, vote=1, commit=400), entries)
        store.set_meta("cluster_id", "killed")
        os._exit(0)  # no close(), no checkpoint, no interpreter cleanup
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert Path(f"{db}-wal").exists()  # the batch is (only) in the WAL: recovery must run
    with LogStore(db) as store:
        state = store.load()
        assert store.get_meta("cluster_id") == "killed"
    assert state.hard_state == HardState(term=2, vote=1, commit=400)
    assert state.entries == [Entry(term=2, index=i, data=b"x%d" % i) for i in range(1, 501)]


def test_use_after_close_raises(db: Path) -> None:
    store = LogStore(db)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        store.load()
    with pytest.raises(StorageError, match="closed"):
        store.save(HardState(term=1), [])


# -- corruption and inconsistency --------------------------------------------------------


def test_garbage_file_is_rejected_naming_it(db: Path) -> None:
    db.write_bytes(b"this is not a database, just some bytes\x00\xff" * 100)
    with pytest.raises(StorageError) as info:
        LogStore(db).load()
    assert str(db) in str(info.value)
    assert "not a SQLite database" in str(info.value)
    assert info.value.path == db


def test_truncated_database_is_rejected_naming_it(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=3000), ents(1, 3001, tag=b"payload" * 20))
    raw(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    size = db.stat().st_size
    assert size > 100_000
    os.truncate(db, size // 2)
    with pytest.raises(StorageError) as info:
        LogStore(db).load()
    assert str(db) in str(info.value)


@pytest.mark.parametrize("commit, term, compact_at, corruption, error", [
    pytest.param(5, 1, 0, "DELETE FROM log WHERE idx = 7",
                 "gap in the log: expected entry 7 after entry 6", id="gap"),
    pytest.param(5, 1, 5, "DELETE FROM log WHERE idx = 6",
                 "gap in the log: expected entry 6 after snapshot 5",
                 id="log-starting-beyond-snapshot"),
    pytest.param(2, 3, 0, "UPDATE log SET term = 2 WHERE idx = 4",
                 "log terms decrease: entry 4 has term 2", id="decreasing-terms"),
    pytest.param(10, 1, 0, "DELETE FROM log WHERE idx > 8",  # the tail of the log was lost
                 "commit index 10 .*: committed entries were lost", id="commit-beyond-last"),
    pytest.param(10, 1, 10, "UPDATE hard_state SET commit_index = 11",
                 "beyond the last stored index 10", id="commit-beyond-snapshot-empty-log"),
])
def test_an_inconsistent_log_is_rejected_naming_the_file(
        db: Path, commit: int, term: int, compact_at: int, corruption: str, error: str) -> None:
    """A log that loads (compacted at `compact_at`, if set; at the commit index, the log
    is empty), edited behind the store's back into one Raft must not restart from."""
    with LogStore(db) as store:
        store.save(HardState(term=term, commit=commit), ents(1, 11, term=term))
        if compact_at:
            store.compact(snap(db, compact_at, term))
    assert reopen(db).hard_state.commit == commit
    raw(db, corruption)
    with pytest.raises(StorageError, match=error) as info:
        reopen(db)
    assert str(db) in str(info.value)


@pytest.mark.parametrize("open_store", [LogStore, LogReader])
def test_unknown_schema_version_is_rejected(db: Path, open_store) -> None:
    """The writer and the reader both refuse a file of another schema version."""
    LogStore(db).close()
    raw(db, "PRAGMA user_version = 7")
    with pytest.raises(StorageError, match="unknown schema version 7") as info:
        open_store(db)
    assert str(db) in str(info.value)


def test_the_reader_refuses_a_missing_file_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such file") as info:
        LogReader(tmp_path / "raft.db")
    assert str(tmp_path / "raft.db") in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("ending", ["stopped", "killed"])
def test_the_reader_reads_what_a_real_member_wrote_as_the_writer_loads_it(tmp_path, ending):
    """A member (snapshotting every 50 entries) takes puts and a session, then stops
    cleanly (in-process: no WAL left, the file is read immutable) or is killed (a process:
    its WAL holds the latest entries, read mode=ro); the reader returns exactly what
    `LogStore.load` does."""
    killed = ending == "killed"
    with coord.testing.LocalCluster(members=1, data_dir=tmp_path, in_process=not killed,
                                    extra_args=["--snapshot-every", "50"]) as c:
        with Client(c.endpoints) as client:
            for i in range(80):
                client.put(b"k%d" % (i % 7), b"v%d" % i)
            with client.session(ttl=5) as s:
                s.own("orders", ["p0"])
        if killed:
            c.kill("n1")
        else:
            c.stop()
        path = db_path(c.members["n1"].data_dir)
        assert path.with_name("raft.db-wal").exists() == killed
        with LogReader(path) as reader, reader.transaction():
            info, hard_state, snapshot = reader.info(), reader.hard_state(), reader.snapshot()
            entries = reader.entries(snapshot.meta.index + 1, 2**62)
        assert snapshot.meta.index >= 50 and entries  # both parts of the log are there
        with LogStore(path) as store:
            assert store.load() == PersistedState(hard_state, snapshot, entries)
        assert (info.member, info.snapshot_index, info.first_index, info.commit_index) == (
            "n1", snapshot.meta.index, entries[0].index, hard_state.commit)


def test_foreign_sqlite_database_is_rejected_untouched(db: Path) -> None:
    raw(db, "CREATE TABLE users (name TEXT)")
    with pytest.raises(StorageError, match="not a coord storage file"):
        LogStore(db)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    finally:
        conn.close()


def test_the_snapshot_is_a_file_the_log_names_and_files_it_does_not_go(db: Path) -> None:
    """The log stores only a snapshot file's name, size and CRC: a store refuses a
    snapshot that is not a file of its snapshot dir, counts the file in its space,
    removes it once it stores a newer one, and does not load when it is missing or
    changed size; at load, the files it does not name are removed (they were being
    written or received when the member stopped)."""
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=5), ents(1, 11))
        with pytest.raises(ValueError, match="SnapshotFile"):
            store.compact(Snapshot(SnapshotMeta(5, 1), data=b"state"))
        big = snap(db, 4, 1, data=os.urandom(1 << 20))
        store.compact(big)  # a store's space counts its snapshot's file (the quota's)
        assert store.space().used_bytes > 1 << 20 and store.space().file_bytes > 1 << 20
        taken = snap(db, 5, 1)
        store.compact(taken)
        assert store.space().used_bytes < 1 << 20 and not big.data.path.exists()
    unfinished = snap(db, 9, 1)
    assert reopen(db).snapshot == taken
    assert sorted(snap_dir(db.parent).iterdir()) == [taken.data.path]
    assert not unfinished.data.path.exists()
    with open(taken.data.path, "ab") as f:
        f.write(b"more")
    with pytest.raises(StorageError, match="holds 9 bytes, recorded as 5"):
        reopen(db)
    taken.data.path.unlink()
    with pytest.raises(StorageError, match="snapshot file .* is gone"):
        reopen(db)


def test_unknown_entry_type_is_rejected(db: Path) -> None:
    with LogStore(db) as store:
        store.save(None, ents(1, 3))
    raw(db, "UPDATE log SET type = 9 WHERE idx = 2")
    with pytest.raises(StorageError, match="unknown type 9"):
        reopen(db)


def test_schema_is_plain_sqlite(db: Path) -> None:
    with LogStore(db) as store:
        store.save(HardState(term=2, vote=1, commit=1), ents(1, 3))
        taken = snap(db, 1, 1)
        store.compact(taken)
        store.set_meta("k", "v")
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT idx, term, type, data FROM log").fetchall() == [
            (2, 1, 0, b"e2")
        ]
        assert conn.execute("SELECT term, vote, commit_index FROM hard_state").fetchall() == [
            (2, 1, 1)
        ]
        assert conn.execute(
            "SELECT idx, term, voters, learners, file, size, crc FROM snapshot"
        ).fetchall() == [(1, 1, "1,2,3", "7", taken.data.path.name, 5, zlib.crc32(b"state"))]
        assert conn.execute("SELECT key, value FROM meta").fetchall() == [("k", "v")]
    finally:
        conn.close()


def test_unsynced_save_is_kept_and_later_saves_sync_again(tmp_path):
    """`sync=False` (a commit-index-only batch) is still written: a reopen sees it, and
    the synced connection's settings are untouched by it (what the disk is asked to do
    is test_unsynced_saves')."""
    path = tmp_path / "raft.db"
    store = LogStore(path)
    store.save(HardState(1, 0, 0), [Entry(1, i) for i in range(1, 4)])
    store.save(HardState(1, 0, 2), [], sync=False)
    conn = store._connection()
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # the default
    store.close()
    assert LogStore(path).load().hard_state == HardState(1, 0, 2)


def test_an_unsynced_commit_past_the_logs_end_is_refused_and_writes_nothing(db: Path) -> None:
    """A commit index alone is one statement of its own, yet checked as any save is: past
    the log's last index it is refused before it is written, by a store that knows its
    ends and by one that has yet to read them from the file (just opened)."""
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 4))
        with pytest.raises(ValueError, match="commit index 5 is beyond the last index 3"):
            store.save(HardState(term=1, commit=5), [], sync=False)
        assert _hard_state_on_disk(db) == (1, 0, 1)
    with LogStore(db) as store:
        with pytest.raises(ValueError, match="commit index 4 is beyond the last index 3"):
            store.save(HardState(term=1, commit=4), [], sync=False)
        assert _hard_state_on_disk(db) == (1, 0, 1)
        store.save(HardState(term=1, commit=3), [], sync=False)
    assert reopen(db).hard_state == HardState(term=1, commit=3)


def _hard_state_on_disk(db: Path) -> tuple[int, int, int]:
    """The hard state as another connection reads the file (the store's WAL included)."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT term, vote, commit_index FROM hard_state").fetchone()
    finally:
        conn.close()


def test_an_unsynced_save_refuses_a_snapshot_and_writes_nothing(db: Path) -> None:
    """Storing a snapshot removes the older one's file, so it is done only by a synced
    commit: unsynced, a power loss could leave the log naming the file that went."""
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=5), ents(1, 11))
        stored = snap(db, 4, 1)
        store.compact(stored)
        newer = snap(db, 8, 1)
        with pytest.raises(ValueError, match="only by a synced save"):
            store.save(HardState(term=1, commit=8), [], newer, sync=False)
        assert stored.data.path.exists()
    assert reopen(db).snapshot == stored and reopen(db).hard_state.commit == 5


def _write(store: LogStore, db: Path, op: tuple) -> None:
    """One write of the differential test below, to `store` (its file at `db`)."""
    kind, *args = op
    if kind == "append":
        term, commit, first, count, synced = args
        store.save(HardState(term, 0, commit),
                   ents(first, first + count, term, tag=b"t%d" % term), sync=synced)
    elif kind == "compact":
        index, term = args
        store.compact(snap(db, index, term))
    elif kind == "snapshot":
        index, term = args
        store.save(HardState(term, 0, index), [], snap(db, index, term))
    elif kind == "commit":
        term, commit = args
        store.save(HardState(term, 0, commit), [], sync=False)
    else:  # refused: a commit past the log's end, so nothing is written
        term, last = args
        with pytest.raises(ValueError):
            store.save(HardState(term, 0, last + 5), ents(last + 1, last + 2))


def test_a_store_kept_open_writes_what_one_opened_for_each_write_would(
        tmp_path: Path) -> None:
    """The store keeps where its log starts and ends in memory instead of reading it in
    every write. Random appends (some overwriting a suffix), compactions, leader
    snapshots (matching the log or not), commit-only writes and refused writes go to a
    store kept open and to a twin opened afresh for each write, which reads its ends
    from the file: after every step both files load the same."""
    import random

    rng = random.Random(5)
    kept_db, twin_db = tmp_path / "kept" / "raft.db", tmp_path / "twin" / "raft.db"
    log: list[tuple[int, int]] = []  # the model: (index, term) after the snapshot
    snap_at, commit = (0, 0), 0
    with LogStore(kept_db) as kept:
        for step in range(200):
            last, last_term = log[-1] if log else snap_at
            r = rng.random()
            if r < 0.55:  # append from a random point after the commit
                first = rng.randint(max(snap_at[0], commit) + 1, last + 1)
                term, count = last_term + rng.choice([0, 0, 1]), rng.randint(1, 3)
                op: tuple = ("append", term, commit, first, count, rng.random() < 0.7)
                log = [x for x in log if x[0] < first] + [(first + k, term)
                                                          for k in range(count)]
            elif r < 0.7 and commit > snap_at[0]:  # compact up to a committed entry
                index, term = rng.choice([x for x in log if x[0] <= commit])
                op = ("compact", index, term)
                log, snap_at = [x for x in log if x[0] > index], (index, term)
            elif r < 0.8:  # a leader's snapshot at or past the end, matching or not
                index, term = last + rng.randint(0, 2), last_term + rng.choice([0, 1])
                if index <= commit:
                    continue
                op = ("snapshot", index, term)
                log = [x for x in log if x[0] > index] if (index, term) in log else []
                snap_at, commit = (index, term), index
            elif r < 0.93:  # only the commit index moves
                commit = rng.randint(commit, last)
                op = ("commit", last_term, commit)
            else:
                op = ("refused", last_term, last)
            _write(kept, kept_db, op)
            with LogStore(twin_db) as twin:
                _write(twin, twin_db, op)
            a, b = kept.load(), reopen(twin_db)
            assert a.hard_state == b.hard_state, (step, op)
            assert a.snapshot.meta == b.snapshot.meta, (step, op)
            assert a.entries == b.entries, (step, op)
            assert [(e.index, e.term) for e in a.entries] == log, (step, op)


def test_a_failed_unsynced_commit_is_a_storage_error_that_trims_the_wal(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit index alone that SQLite refuses (here a trigger another connection made)
    is a StorageError naming the store; the WAL is trimmed of what the failed statement
    may have left, nothing is written, no transaction stays open, and the store goes on."""
    trims: list[Path] = []
    monkeypatch.setattr(log_store, "trim_a_failed_write", trims.append)
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 4))
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("CREATE TRIGGER no_commit BEFORE UPDATE ON hard_state "
                      "BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END")
        with pytest.raises(StorageError, match="save failed: refused by trigger") as caught:
            store.save(HardState(term=1, commit=2), [], sync=False)
        assert isinstance(caught.value.__cause__, sqlite3.Error)
        assert trims == [db]
        assert not store._unsynced_connection().in_transaction
        assert _hard_state_on_disk(db) == (1, 0, 1)
        other.execute("DROP TRIGGER no_commit")
        other.close()
        store.save(HardState(term=1, commit=3), [], sync=False)
    assert _hard_state_on_disk(db) == (1, 0, 3)


def test_an_unsynced_commit_that_cannot_take_the_write_lock_trims_nothing(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection holds the write lock: the statement gives up without writing,
    so the WAL's end is the holder's and is left alone, as after a BEGIN that fails."""
    trims: list[Path] = []
    monkeypatch.setattr(log_store, "trim_a_failed_write", trims.append)
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 4))
        store._unsynced_connection().execute("PRAGMA busy_timeout = 0")
        other = sqlite3.connect(db, isolation_level=None, timeout=0)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageError, match="cannot begin a transaction: .*locked"):
                store.save(HardState(term=1, commit=2), [], sync=False)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert trims == []
        assert not store._unsynced_connection().in_transaction
        store.save(HardState(term=1, commit=2), [], sync=False)
    assert _hard_state_on_disk(db) == (1, 0, 2)


class _FailingCommit:
    """A store's connection whose COMMIT raises `error`."""

    def __init__(self, real: sqlite3.Connection, error: BaseException) -> None:
        self.real, self.error = real, error

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise self.error
        return self.real.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


@pytest.mark.parametrize("error, raised", [
    (sqlite3.OperationalError("disk I/O error"), StorageError),
    (KeyboardInterrupt(), KeyboardInterrupt),
])
def test_a_failed_commit_rolls_back_and_goes_on_up(
        db: Path, error: BaseException, raised: type[BaseException],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A write whose COMMIT fails is rolled back and its error goes on up: SQLite's as a
    StorageError after the WAL is trimmed, anything else as it is; the store forgets the
    log's ends (the write may or may not have moved them) and reads them at the next."""
    trims: list[Path] = []
    monkeypatch.setattr(log_store, "trim_a_failed_write", trims.append)
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 4))
        real = store._conn
        store._conn = _FailingCommit(real, error)  # type: ignore[assignment]
        try:
            with pytest.raises(raised) as caught:
                store.save(HardState(term=1, commit=4), ents(4, 5))
        finally:
            store._conn = real
        if raised is StorageError:
            assert "save failed: disk I/O error" in str(caught.value)
            assert caught.value.__cause__ is error
            assert trims == [db]
        else:
            assert caught.value is error and trims == []
        assert not real.in_transaction
        assert store._tail is None
        store.save(HardState(term=1, commit=4), ents(4, 6))
    assert reopen(db).entries == ents(1, 6)


@pytest.mark.parametrize("point, written", [("log-before-fsync", False),
                                            ("log-after-fsync", True)])
def test_a_failpoint_error_either_side_of_a_commit_is_a_storage_error(
        db: Path, point: str, written: bool) -> None:
    """The log's failpoints fail a synced write as a failed disk would: before the
    fsync nothing is kept, after it the write is (and the caller cannot tell which)."""
    with LogStore(db) as store:
        store.save(HardState(term=1, commit=1), ents(1, 4))
        failpoints.arm(f"{point}=error")
        try:
            with pytest.raises(StorageError, match="save failed: .*injected I/O failure"):
                store.save(None, ents(4, 5))
        finally:
            failpoints.arm("")
        assert not store._conn.in_transaction
    assert reopen(db).entries == ents(1, 5 if written else 4)
