"""Durable Raft storage for one member, on SQLite.

The Raft core is pure and keeps its (compacted) log in memory, so this module is
write-mostly: :meth:`LogStore.load` runs once at start-up, :meth:`LogStore.save` runs once
per Ready batch (group commit: one transaction and one fsync however many entries the
batch carries) and :meth:`LogStore.compact` runs after the state machine takes a snapshot.

The file is a plain SQLite database, so that ordinary tools (``sqlite3``, sqlite-utils)
can inspect it; its tables and version are `log_format`'s, which the read-only
`log_reader` shares. The snapshot's bytes are a file of their own in the snapshot dir
beside it (`snapshot_file`): the database names it, and a store that stores a newer
snapshot removes the older files.

Durability: WAL journal with ``synchronous=FULL``, so every commit fsyncs the WAL before
it returns (except ``save(..., sync=False)``, which the driver uses for a batch that only
moves the commit index: written, not fsync'd; the next synced commit covers it). The
unsynced writes go through a second connection to the same file, opened for them with
``synchronous=NORMAL`` (no fsync at a WAL commit) and no autocheckpoint, rather than
turning the first one's settings off and on around each: four statements less in every
member's commit round; and a commit index alone is its one statement in autocommit, with
no BEGIN and COMMIT around it. A :class:`StorageError` raised by a write means the batch
may or may not be durable; the caller must stop rather than carry on as if it were (or
were not).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from coord.raft.types import Entry, HardState, Snapshot
from coord.server import failpoints
from coord.server.snapshot_file import SnapshotFile, fsync_dir, snap_dir, sweep
from coord.server.storage import log_format as fmt
from coord.server.storage.log_format import StorageError
from coord.server.storage.log_tail import LogTail, read_tail, term_at
from coord.server.storage.wal_check import check_the_wal_tail, trim_a_failed_write

__all__ = ["LogStore", "PersistedState", "StorageError"]


@dataclass(frozen=True, slots=True)
class StoreSpace:
    """The snapshot's file counts in both: it is the part of the store that holds the
    state (it was a blob in the database before it was a file of its own)."""

    file_bytes: int  # the database, its WAL and the snapshot's file on disk
    used_bytes: int  # pages holding data (file pages less SQLite's free list), snapshot


@dataclass(frozen=True, slots=True)
class PersistedState:
    """Everything the Raft core needs to restart where it left off."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot = field(default_factory=Snapshot)
    """``Snapshot()`` (``meta.index == 0``) when none was ever taken."""
    entries: list[Entry] = field(default_factory=list)
    """Every entry after ``snapshot.meta.index``, contiguous and in order."""


class LogStore:
    """The Raft log, hard state, latest snapshot and metadata of one member, in one file.

    Opening checks the file (SQLite ``quick_check`` and schema version) and creates it,
    with any missing parent directories, when it does not exist. Methods may be called
    from any thread (the driver uses an executor), one at a time.
    """

    path: Path
    snap_dir: Path
    """Where the snapshot files are (`snapshot_file`): a snapshot stored here is one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.snap_dir = snap_dir(self.path.parent)
        self._lock = threading.Lock()
        self.on_commit: Callable[[float, float, bool], None] | None = None
        """Told of every write transaction, under the store's lock: (seconds from BEGIN to
        the end of COMMIT, seconds of the COMMIT alone, whether it fsync'd): the member's
        disk metrics (coord.server.metrics). A commit index alone, one statement with no
        BEGIN or COMMIT, is told its statement's seconds as both."""
        self._conn: sqlite3.Connection | None = None
        self._tail: LogTail | None = None
        """The log's ends as the last committed write left them; None until read (and
        after a failed write, which may or may not have changed them)."""
        self._unsynced: sqlite3.Connection | None = None  # opened at the first unsynced write
        if self.path.is_dir():
            raise StorageError(self.path, "is a directory, not a storage file")
        changed_dirs = self._make_parent_dirs()
        if not self.path.exists():
            changed_dirs.append(self.path.absolute().parent)
        check_the_wal_tail(self.path)
        conn = self._connect()
        try:
            self._open(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        # SQLite fsyncs the directory when it creates the WAL but not for the main file or
        # for directories we made: without this a crash could forget the store existed.
        for directory in dict.fromkeys(changed_dirs):
            self._fsync_dir(directory)

    # -- public API -----------------------------------------------------------------

    def load(self) -> PersistedState:
        """Read everything back and check it is a log Raft can safely restart from.

        Raises StorageError for gaps in the log, terms going backwards, a commit index
        beyond the last stored entry (committed entries were lost), undecodable rows or a
        missing snapshot file. Removes the snapshot files the log does not name (they
        were being written or received when the member stopped).
        """
        with self._lock, self._reading("load") as conn:
            hard_state = fmt.read_hard_state(conn, self.path)
            snapshot = fmt.read_snapshot(conn, self.path)
            snap_index = snapshot.meta.index
            entries = fmt.read_entries(conn, self.path, snap_index + 1)
        sweep(self.snap_dir, _file_of(snapshot), everything_else=True)

        expected, prev_term = snap_index + 1, snapshot.meta.term
        for entry in entries:
            if entry.index != expected:
                what = "snapshot" if expected == snap_index + 1 else "entry"
                raise StorageError(
                    self.path,
                    f"gap in the log: expected entry {expected} after {what} "
                    f"{expected - 1}, found entry {entry.index}",
                )
            if entry.term < prev_term:
                raise StorageError(
                    self.path,
                    f"log terms decrease: entry {entry.index} has term {entry.term} "
                    f"after term {prev_term} at index {entry.index - 1}",
                )
            expected, prev_term = expected + 1, entry.term

        last_index = entries[-1].index if entries else snap_index
        if hard_state.commit > last_index:
            raise StorageError(
                self.path,
                f"commit index {hard_state.commit} is beyond the last stored index "
                f"{last_index}: committed entries were lost",
            )
        return PersistedState(hard_state=hard_state, snapshot=snapshot, entries=entries)

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: Snapshot | None = None,
        sync: bool = True,
    ) -> None:
        """Durably persist one Ready batch in one transaction (one fsync).

        ``sync=False`` skips the fsync (the batch survives a process crash, and a power
        loss only if a later synced batch made it durable): for a batch that only moves
        the commit index, which Raft can relearn. Never with a snapshot (ValueError):
        storing one removes the older snapshot's file, which an unsynced commit could
        leave the log still naming after a power loss.

        Order within the transaction: ``snapshot`` replaces the stored one (an empty
        snapshot counts as none); then ``entries`` replace every stored entry from
        ``entries[0].index`` on, since a leader may overwrite a conflicting suffix; then
        ``hard_state`` is stored. Raises ValueError, writing nothing, for a batch that
        would leave an unloadable log (gaps, terms going backwards, commit beyond the
        log, an older snapshot, a snapshot whose data is not a file in `snap_dir`).
        Once stored, a snapshot's older files go.
        """
        if snapshot is not None and snapshot.is_empty:
            snapshot = None
        if snapshot is not None and not sync:
            raise ValueError("a snapshot is stored only by a synced save")
        if hard_state is None and not entries and snapshot is None:
            return  # nothing to make durable: not even an empty transaction
        if not sync and not entries and snapshot is None:
            self._save_commit(hard_state)
            return
        rows = _entry_rows(entries)
        with self._lock:
            with self._writing("save", sync) as conn:
                tail = self._take_tail(conn)
                if snapshot is not None:
                    tail = self._put_snapshot(conn, snapshot, tail)
                if rows:
                    tail = self._put_entries(conn, entries, rows, tail)
                if hard_state is not None:
                    _check_commit(hard_state, tail)
                    hard = (hard_state.term, hard_state.vote, hard_state.commit)
                    conn.execute(fmt.PUT_HARD_STATE, hard)
            self._tail = tail  # committed
        if snapshot is not None:
            sweep(self.snap_dir, _file_of(snapshot))

    def _save_commit(self, hard_state: HardState) -> None:
        """An unsynced save of the hard state alone (the commit index moved, as a member
        saves it in every commit round): its one statement in autocommit, a transaction
        of its own with the same locks and writes, not wrapped in BEGIN IMMEDIATE and
        COMMIT, which with the Python around them cost more than the statement itself.
        Refused (ValueError), writing nothing, past the log's last index, as any save."""
        with self._lock:
            conn = self._unsynced_connection()
            tail = self._tail
            began = time.perf_counter()
            try:
                if tail is None:
                    # not read yet, or forgotten after a failed write; under the store's
                    # lock no other write runs, so the file's ends are the log's
                    tail = self._tail = read_tail(conn)
                _check_commit(hard_state, tail)
                conn.execute(
                    fmt.PUT_HARD_STATE, (hard_state.term, hard_state.vote, hard_state.commit)
                )
            except sqlite3.Error as e:  # the statement rolled back
                if e.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    # it never had the write lock, so it wrote nothing: whatever ends the
                    # WAL is the lock holder's, not ours to trim (as a BEGIN that fails)
                    raise StorageError(
                        self.path, f"save: cannot begin a transaction: {e}") from e
                trim_a_failed_write(self.path)  # a partial frame may stay
                raise StorageError(self.path, f"save failed: {e}") from e
            if self.on_commit is not None:
                took = time.perf_counter() - began
                self.on_commit(took, took, False)

    def compact(self, snapshot: Snapshot) -> None:
        """Store ``snapshot`` and drop the log entries it covers (index <= its index).

        Called after the state machine took ``snapshot``, so the entries after it are
        kept. Should the log not contain the snapshot's own (index, term), those entries
        cannot extend it and are dropped as well, exactly as when a snapshot arrives
        from the leader.
        """
        if snapshot.is_empty:
            raise ValueError("cannot compact to an empty snapshot (index 0)")
        with self._lock:
            with self._writing("compact") as conn:
                tail = self._put_snapshot(conn, snapshot, self._take_tail(conn))
            self._tail = tail  # committed
        sweep(self.snap_dir, _file_of(snapshot))

    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key``, or None."""
        with self._lock, self._reading("get_meta") as conn:
            return fmt.read_meta(conn, self.path, key)

    def set_meta(self, key: str, value: str) -> None:
        """Durably store ``value`` under ``key`` (replacing any previous value)."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("meta keys and values must be str")
        with self._lock, self._writing("set_meta") as conn:
            conn.execute(fmt.PUT_META, (key, value))

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Stored entries with ``lo <= index < hi``, in order, for export and inspection.

        Returns what is on disk without filling or reporting gaps (``load`` checks those).
        """
        with self._lock, self._reading("entries") as conn:
            return fmt.read_entries(conn, self.path, lo, hi)

    def space(self) -> StoreSpace:
        """How much disk the store takes and how much of it holds data (the rest is free
        pages SQLite reuses before growing the file; `defrag` gives them back)."""
        with self._lock, self._reading("space") as conn:
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            (free,) = conn.execute("PRAGMA freelist_count").fetchone()
            snapshot = fmt.snapshot_size(conn)
        return StoreSpace(
            file_bytes=self._file_bytes() + snapshot,
            used_bytes=(pages - free) * page_size + snapshot,
        )

    def defrag(self) -> tuple[StoreSpace, StoreSpace]:
        """Give free space back to the file system: checkpoint the WAL into the database,
        VACUUM it (rewritten without free pages), truncate the WAL. Blocks other store
        calls meanwhile (etcd's defrag blocks its member too). (before, after)."""
        before = self.space()
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("VACUUM")
                failpoints.hit("defrag")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except (sqlite3.Error, OSError) as e:
                raise StorageError(self.path, f"defrag failed: {e}") from e
        return before, self.space()

    def _file_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with suppress(OSError):
                total += os.path.getsize(f"{self.path}{suffix}")
        return total

    def close(self) -> None:
        """Close the database (idempotent); later calls raise StorageError."""
        with self._lock:
            conns = (self._unsynced, self._conn)
            self._unsynced = self._conn = None
            errors = []
            for conn in conns:
                if conn is not None:
                    try:
                        conn.close()
                    except sqlite3.Error as e:
                        errors.append(e)
            if errors:
                raise StorageError(self.path, f"cannot close: {errors[0]}") from errors[0]

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"LogStore({str(self.path)!r}, {state})"

    # -- opening ----------------------------------------------------------------------

    def _make_parent_dirs(self) -> list[Path]:
        """Create missing parent directories; return the directories whose entries changed."""
        parent = self.path.absolute().parent
        missing: list[Path] = []
        existing = parent
        while not existing.exists():
            missing.append(existing)
            existing = existing.parent
        if not missing:
            return []
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(self.path, f"cannot create directory {parent}: {e}") from e
        # Each directory gained an entry: the topmost existing one and each one created
        # except the innermost, which only gains one when the file itself is created.
        return [existing, *reversed(missing[1:])]

    def _fsync_dir(self, directory: Path) -> None:
        try:
            fsync_dir(directory)
        except OSError as e:
            self.close()
            raise StorageError(self.path, f"cannot fsync directory {directory}: {e}") from e

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(
                # Absolute, so that a name like ":memory:" can never mean "not on disk".
                str(self.path.absolute()),
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # the driver calls from an executor thread
            )
        except sqlite3.Error as e:
            raise StorageError(self.path, f"cannot open: {e}") from e

    def _open(self, conn: sqlite3.Connection) -> None:
        """Check the file is an intact store of our schema version, creating the schema."""
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as e:
            raise StorageError(self.path, f"not a SQLite database, or corrupt: {e}") from e
        if problems != ["ok"]:
            shown = "; ".join(str(p) for p in problems[:5])
            raise StorageError(self.path, f"database is corrupt (quick_check: {shown})")
        try:
            # FULL: fsync at every commit, so a save() that returned survives power loss.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA fullfsync = ON")  # macOS: a real flush; elsewhere a no-op
            conn.execute("BEGIN IMMEDIATE")  # so two processes cannot both create the schema
            try:
                self._check_or_create_schema(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            # Only now that the file is known to be ours: the mode is persistent in the file.
            # Where WAL is unavailable (some network filesystems) the mode stays
            # rollback-journal, which is slower but just as durable.
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as e:
            raise StorageError(self.path, f"cannot open store: {e}") from e

    def _check_or_create_schema(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if version == 0:
            if tables:
                raise StorageError(
                    self.path,
                    "not a coord storage file: no schema version but has tables "
                    + ", ".join(sorted(tables)),
                )
            for statement in fmt.SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {fmt.SCHEMA_VERSION}")
            return
        fmt.check_version(self.path, version)
        missing = sorted(set(fmt.TABLES) - tables)
        if missing:
            raise StorageError(self.path, "schema is missing tables: " + ", ".join(missing))

    # -- transactions -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(self.path, "store is closed")
        return self._conn

    def _unsynced_connection(self) -> sqlite3.Connection:
        """The connection for writes that need no fsync. `synchronous=NORMAL`: in WAL
        mode its commits do not fsync, but whatever else it writes is synced as SQLite
        requires: a checkpoint (it runs none of its own, `wal_autocheckpoint=0`, but the
        last connection to close checkpoints and deletes the WAL, whichever it is) and
        the WAL's header when it restarts the WAL after a checkpoint. Where WAL is
        unavailable its commits fsync like the other's (a rollback journal's in-place
        writes could tear the file otherwise)."""
        self._connection()  # raises once the store is closed
        if self._unsynced is None:
            conn = self._connect()
            try:
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA fullfsync = ON")  # macOS: a real flush; elsewhere a no-op
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            except sqlite3.Error as e:
                conn.close()
                raise StorageError(self.path, f"cannot open store: {e}") from e
            self._unsynced = conn
        return self._unsynced

    def _writing(self, what: str, sync: bool = True) -> _Writing:
        """One write transaction; COMMIT returns only once the WAL is fsync'd (unless
        `sync` is false: then it is only written), and a synced one passes the log's
        failpoints either side of it."""
        return _Writing(self, what, sync)

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One read transaction, so multi-table reads see a single consistent state."""
        conn = self._connection()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise StorageError(self.path, f"{what} failed: {e}") from e

    # -- writing --------------------------------------------------------------------

    def _take_tail(self, conn: sqlite3.Connection) -> LogTail:
        """The log's ends for a write beginning: the store forgets them until the write
        is known committed (a failed one may or may not have changed them)."""
        tail, self._tail = self._tail, None
        return tail if tail is not None else read_tail(conn)

    def _put_snapshot(self, conn: sqlite3.Connection, snapshot: Snapshot, tail: LogTail) -> LogTail:
        """Replace the stored snapshot and drop the entries it supersedes; the new tail."""
        meta = snapshot.meta
        data = snapshot.data
        if not (
            isinstance(data, SnapshotFile) and data.path.parent.resolve() == self.snap_dir.resolve()
        ):
            raise ValueError(
                f"a snapshot's data is a SnapshotFile in {self.snap_dir}, not {data!r}"
            )
        current = tail.snap_index
        if meta.index < current:
            # Replacing it would lose the entries between the two: the log would have a gap.
            raise ValueError(
                f"snapshot at index {meta.index} is older than the stored one at {current}"
            )
        # Entries after the snapshot survive only if they extend it: the log must hold the
        # snapshot's own (index, term). Otherwise they are a stale suffix (the leader sent a
        # snapshot because our log diverged) and keeping them would break the log.
        extends = term_at(conn, tail, meta.index) == meta.term
        try:
            data.durable()  # before the log names it
        except OSError as e:
            raise StorageError(self.path, f"cannot make {data.path} durable: {e}") from e
        conn.execute(fmt.PUT_SNAPSHOT, fmt.snapshot_row(snapshot))
        if extends:
            conn.execute("DELETE FROM log WHERE idx <= ?", (meta.index,))
            if tail.last_index > meta.index:
                return LogTail(meta.index, meta.term, tail.last_index, tail.last_term)
        else:
            conn.execute("DELETE FROM log")
        return LogTail(meta.index, meta.term, meta.index, meta.term)

    def _put_entries(
        self, conn: sqlite3.Connection, entries: Sequence[Entry], rows: list[tuple], tail: LogTail
    ) -> LogTail:
        """Store `entries` in place of every stored entry from the first of them on; the
        new tail. An append past the end (the usual case) reads and deletes nothing."""
        first, last = entries[0], tail.last_index
        floor = tail.snap_index
        if first.index <= floor:
            raise ValueError(f"entry {first.index} is covered by the snapshot at index {floor}")
        if first.index > last + 1:
            raise ValueError(f"entry {first.index} would leave a gap after last index {last}")
        prev_term = term_at(conn, tail, first.index - 1)
        if prev_term is not None and first.term < prev_term:
            raise ValueError(
                f"entry {first.index} has term {first.term}, "
                f"below term {prev_term} of entry {first.index - 1}"
            )
        if first.index <= last:  # a leader overwrites a conflicting suffix
            conn.execute("DELETE FROM log WHERE idx >= ?", (first.index,))
        conn.executemany(fmt.INSERT_ENTRY, rows)
        return LogTail(tail.snap_index, tail.snap_term, entries[-1].index, entries[-1].term)


class _Writing:
    """`LogStore._writing`'s transaction, a context manager of its own rather than a
    generator under `contextlib.contextmanager`: every write round of every member opens
    one, and a generator's machinery costs more instructions than the BEGIN it wraps."""

    __slots__ = ("_store", "_what", "_sync", "_conn", "_began")

    def __init__(self, store: LogStore, what: str, sync: bool) -> None:
        self._store, self._what, self._sync = store, what, sync

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        conn = self._conn = store._connection() if self._sync else store._unsynced_connection()
        self._began = time.perf_counter()
        try:
            # IMMEDIATE takes the write lock up front, so the batch cannot fail half way
            # through for want of it.
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise StorageError(store.path, f"{self._what}: cannot begin a transaction: {e}") from e
        return conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 _tb: object) -> bool:
        if error is None:
            try:
                self._commit()
                return False
            except BaseException as e:
                error = e
        conn = self._conn
        if conn.in_transaction:  # a failed COMMIT may already have rolled back
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        if isinstance(error, sqlite3.Error | OSError):
            trim_a_failed_write(self._store.path)
            raise StorageError(self._store.path, f"{self._what} failed: {error}") from error
        if kind is None:  # the COMMIT's own failure, not the body's
            raise error
        return False

    def _commit(self) -> None:
        sync, on_commit = self._sync, self._store.on_commit
        if sync:
            failpoints.hit("log-before-fsync")
        committing = time.perf_counter()
        self._conn.execute("COMMIT")
        if sync:
            failpoints.hit("log-after-fsync")
        if on_commit is not None:
            done = time.perf_counter()
            on_commit(done - self._began, done - committing, sync)


def _check_commit(hard_state: HardState, tail: LogTail) -> None:
    """A commit index past the log's last index would claim entries the log lacks."""
    if hard_state.commit > tail.last_index:
        raise ValueError(
            f"commit index {hard_state.commit} is beyond the last index {tail.last_index}"
        )


def _file_of(snapshot: Snapshot) -> SnapshotFile | None:
    """A stored snapshot's file (None for no snapshot)."""
    return snapshot.data if isinstance(snapshot.data, SnapshotFile) else None


def _entry_rows(entries: Sequence[Entry]) -> list[tuple[int, int, int, bytes]]:
    """Rows for executemany, after checking the batch is itself a contiguous log."""
    rows = []
    prev: Entry | None = None
    for entry in entries:
        if prev is None:
            if entry.index < 1:
                raise ValueError(f"entry indexes start at 1, got {entry.index}")
        elif entry.index != prev.index + 1:
            raise ValueError(f"entries are not contiguous: {prev.index} then {entry.index}")
        elif entry.term < prev.term:
            raise ValueError(
                f"entry terms decrease: {prev.term} at {prev.index}, {entry.term} at {entry.index}"
            )
        rows.append(fmt.entry_row(entry))
        prev = entry
    return rows
