"""The SQLite format of a member's log file, written down once.

The member writes the file (`log_store.LogStore`); tools and the member's live export read
it (`log_reader.LogReader`, read-only). Both take the schema, its version and the way a
row becomes a Raft value from here, so a change to the format is made in this module and
the two cannot drift apart:

* ``log(idx, term, type, data)``: one row per entry; ``type`` is an :class:`EntryType`.
* ``hard_state(id, term, vote, commit_index)``: at most one row (``id = 1``).
* ``snapshot(id, idx, term, voters, learners, file, size, crc)``: at most one row
  (``id = 1``); voters and learners are comma-separated node ids; ``file`` names the
  snapshot's bytes in the snapshot dir (`snapshot_file`), ``size`` and ``crc`` (CRC-32)
  are theirs.
* ``meta(key, value)``: small strings the member keeps: its name (:data:`NAME_KEY`) and
  the cluster id (:data:`CLUSTER_ID_KEY`).
* ``PRAGMA user_version`` is the schema version (:data:`SCHEMA_VERSION`).

And the bytes the node keeps in them: a NORMAL entry's data is the leader's clock reading
at proposal (8 bytes big-endian, Unix ms) then the command, or empty for a new leader's
no-op (the time in the entry keeps apply deterministic); a snapshot's file holds 4 bytes
big-endian N, N bytes of member records (one a line), then the state machine's bytes.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from coord.raft.types import ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMeta
from coord.server.snapshot_file import SnapshotFile, snap_dir

DB_NAME = "raft.db"
"""The log file's name inside a member's data dir."""

SCHEMA_VERSION = 2
"""Stored in ``PRAGMA user_version``; bumped when the schema changes. Nothing converts an
older format (docs/manual/operations/upgrades.md): a store of another version is refused."""

NAME_KEY, CLUSTER_ID_KEY = "name", "cluster_id"
"""The ``meta`` keys a data dir's identity is stored under (server/node/identity.py)."""

TABLES = ("hard_state", "log", "meta", "snapshot")

SCHEMA = (
    """CREATE TABLE log (
        idx INTEGER PRIMARY KEY,
        term INTEGER NOT NULL,
        type INTEGER NOT NULL,
        data BLOB NOT NULL
    )""",
    """CREATE TABLE hard_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        term INTEGER NOT NULL,
        vote INTEGER NOT NULL,
        commit_index INTEGER NOT NULL
    )""",
    """CREATE TABLE snapshot (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        idx INTEGER NOT NULL,
        term INTEGER NOT NULL,
        voters TEXT NOT NULL,
        learners TEXT NOT NULL,
        file TEXT NOT NULL,
        size INTEGER NOT NULL,
        crc INTEGER NOT NULL
    )""",
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)

INSERT_ENTRY = "INSERT INTO log (idx, term, type, data) VALUES (?, ?, ?, ?)"
PUT_HARD_STATE = (
    "INSERT INTO hard_state (id, term, vote, commit_index) VALUES (1, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET "
    "term = excluded.term, vote = excluded.vote, commit_index = excluded.commit_index"
)
PUT_SNAPSHOT = (
    "INSERT INTO snapshot (id, idx, term, voters, learners, file, size, crc) "
    "VALUES (1, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET idx = excluded.idx, term = excluded.term, "
    "voters = excluded.voters, learners = excluded.learners, file = excluded.file, "
    "size = excluded.size, crc = excluded.crc"
)
PUT_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_NO_END = 2**63 - 1  # above any index SQLite can store
_TIME = struct.Struct(">Q")
_MEMBERS = struct.Struct(">I")


class StorageError(Exception):
    """The store cannot be read or written safely; ``str()`` names the file and the problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = Path(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type[StorageError], tuple[Path, str]]:
        # The two-argument constructor needs this to survive pickling (e.g. to a subprocess).
        return (type(self), (self.path, self.problem))


def entry_data(time_ms: int, payload: bytes) -> bytes:
    return _TIME.pack(time_ms) + payload


def split_entry_data(data: bytes) -> tuple[int, bytes]:
    """A NORMAL entry's (time_ms, command); struct.error if too short for the time."""
    return _TIME.unpack_from(data)[0], data[_TIME.size :]


def members_header(records: Iterable[bytes]) -> bytes:
    """The start of a snapshot's data: its member records; the state machine's follow."""
    encoded = b"\n".join(records)
    return _MEMBERS.pack(len(encoded)) + encoded


class SnapshotGone(StorageError, ValueError):
    """The snapshot file a log names is not there: a reader of a live member's log raced
    the member replacing it with a newer one (the reader's transaction still sees the
    row of the file the member removed). A StorageError where the row is read, a
    ValueError where the file is opened, as the other refusals there are."""


def split_snapshot(snapshot: SnapshotFile) -> tuple[list[bytes], Iterator[bytes]]:
    """A snapshot's (member records, state machine's bytes): the records read now (the
    file opened now), the rest a block at a time as it is asked for, never the whole of a
    snapshot that may be hundreds of MB (`SnapshotFile.blocks`: ValueError for a damaged
    file; this, for one too short for its header or gone)."""
    try:
        blocks = snapshot.blocks()
        head = b""
        while len(head) < _MEMBERS.size or len(head) < _MEMBERS.size + _members_bytes(head):
            block = next(blocks, None)
            if block is None:
                raise ValueError(f"snapshot file {snapshot.path} is too short for its "
                                 "member header")
            head += block
    except FileNotFoundError:
        raise SnapshotGone(snapshot.path, "the snapshot file is gone") from None
    end = _MEMBERS.size + _members_bytes(head)
    members = head[_MEMBERS.size : end]
    return [m for m in members.split(b"\n") if m], _after(head[end:], blocks)


def _members_bytes(head: bytes) -> int:
    return _MEMBERS.unpack_from(head)[0] if len(head) >= _MEMBERS.size else 0


def _after(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def db_path(data_dir: str | os.PathLike[str]) -> Path:
    """The log file of the member whose data dir is `data_dir`."""
    return Path(data_dir) / DB_NAME


def check_version(path: Path, version: int) -> None:
    """StorageError unless `version` (a file's ``user_version``) is the one this build knows."""
    if version != SCHEMA_VERSION:
        raise StorageError(
            path, f"unknown schema version {version} (this build reads version {SCHEMA_VERSION})"
        )


def snapshot_index(conn: sqlite3.Connection) -> int:
    """The stored snapshot's index; 0 when there is none."""
    row = conn.execute("SELECT idx FROM snapshot WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])


def snapshot_size(conn: sqlite3.Connection) -> int:
    """The stored snapshot's file's size in bytes; 0 when there is none."""
    row = conn.execute("SELECT size FROM snapshot WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])


def read_meta(conn: sqlite3.Connection, path: Path, key: str) -> str | None:
    """The value stored under `key`, or None."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    if not isinstance(row[0], str):
        raise StorageError(path, f"meta value for {key!r} is not text: {row[0]!r}")
    return row[0]


def read_hard_state(conn: sqlite3.Connection, path: Path) -> HardState:
    row = conn.execute("SELECT term, vote, commit_index FROM hard_state WHERE id = 1").fetchone()
    if row is None:
        return HardState()
    if not all(type(v) is int and v >= 0 for v in row):
        raise StorageError(path, f"hard state is not three non-negative ints: {row!r}")
    return HardState(term=row[0], vote=row[1], commit=row[2])


def read_snapshot(conn: sqlite3.Connection, path: Path) -> Snapshot:
    """The stored snapshot; its data the `SnapshotFile` in the snapshot dir beside `path`
    (StorageError if that file is not there with the size recorded)."""
    row = conn.execute(
        "SELECT idx, term, voters, learners, file, size, crc FROM snapshot WHERE id = 1"
    ).fetchone()
    if row is None:
        return Snapshot()
    index, term, voters, learners, name, size, crc = row
    if not all(type(v) is int and v >= 0 for v in (index, term, size, crc)):
        raise StorageError(path, f"snapshot index/term/size/crc are not ints: {row!r}")
    if not isinstance(name, str) or not name or os.sep in name:
        raise StorageError(path, f"snapshot file name is not a file's: {name!r}")
    data = SnapshotFile(snap_dir(path.parent) / name, size, crc)
    try:
        found = data.path.stat().st_size
    except FileNotFoundError:
        raise SnapshotGone(path, f"snapshot file {data.path} is gone") from None
    except OSError as e:
        raise StorageError(path, f"snapshot file {data.path} is unreadable: {e}") from None
    if found != size:
        raise StorageError(path, f"snapshot file {data.path} holds {found} bytes, "
                                 f"recorded as {size}")
    try:
        conf_state = ConfState(voters=_parse_ids(voters), learners=_parse_ids(learners))
    except ValueError as e:
        raise StorageError(path, f"snapshot membership is unreadable: {e}") from e
    return Snapshot(meta=SnapshotMeta(index=index, term=term, conf_state=conf_state), data=data)


def read_entries(conn: sqlite3.Connection, path: Path, lo: int, hi: int = _NO_END) -> list[Entry]:
    """Stored entries with ``lo <= index < hi``, in order, as they are on disk (gaps and
    all: `LogStore.load` checks for those)."""
    rows = conn.execute(
        "SELECT idx, term, type, data FROM log WHERE idx >= ? AND idx < ? ORDER BY idx", (lo, hi)
    )
    return [_row_to_entry(path, row) for row in rows]


def first_index_after(conn: sqlite3.Connection, index: int) -> int | None:
    """The first stored entry's index after `index`; None when there is none."""
    return conn.execute("SELECT min(idx) FROM log WHERE idx > ?", (index,)).fetchone()[0]


def snapshot_row(snapshot: Snapshot) -> tuple[int, int, str, str, str, int, int]:
    """`snapshot` as the parameters of :data:`PUT_SNAPSHOT` (its data a `SnapshotFile`)."""
    meta, data = snapshot.meta, snapshot.data
    if not isinstance(data, SnapshotFile):
        raise TypeError(f"a stored snapshot's data is a SnapshotFile, not {type(data)}")
    return (meta.index, meta.term, _format_ids(meta.conf_state.voters),
            _format_ids(meta.conf_state.learners), data.path.name, data.size, data.crc)


def entry_row(entry: Entry) -> tuple[int, int, int, bytes]:
    """`entry` as the parameters of :data:`INSERT_ENTRY`."""
    return (entry.index, entry.term, int(entry.type), bytes(entry.data))


def _row_to_entry(path: Path, row: tuple) -> Entry:
    index, term, kind, data = row
    if type(term) is not int or type(kind) is not int or not isinstance(data, bytes):
        raise StorageError(path, f"log row {index} is malformed: {row!r}")
    try:
        entry_type = EntryType(kind)
    except ValueError:
        raise StorageError(path, f"log entry {index} has unknown type {kind}") from None
    return Entry(term=term, index=index, type=entry_type, data=data)


def _format_ids(ids: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def _parse_ids(text: object) -> frozenset[int]:
    if not isinstance(text, str):
        raise ValueError(f"expected comma-separated ids, got {text!r}")
    if not text.strip():
        return frozenset()
    return frozenset(int(part) for part in text.split(","))
