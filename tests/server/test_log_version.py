"""A data dir replays its log from the revision that log began at: new data is stamped
with the log version (`log_version` 2: the machine begins at 1, as etcd's empty store);
data stamped before versions (coord's `claim_data_dir` wrote only `name` and
`cluster_id`) began at 0 and keeps the revisions its clients were given."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from coord.history import datadir
from coord.server.member import open_node
from coord.server.node.driver import NodeOptions
from coord.server.node.errors import NodeError
from coord.server.node.identity import LOG_VERSION_KEY, log_version
from coord.server.node.members import MemberInfo
from coord.server.storage.log_store import LogStore
from coord.sm.commands import Compact, Put, Range, encode_command
from coord.sm.ledger import LOG_VERSION
from coord.sm.machine import CoordMachine
from tests.server.test_node_snapshot import _wait_leader

ME = MemberInfo("solo", "127.0.0.1:1")
OPTIONS = NodeOptions(tick_ms=10, election_ticks=4, seed=1)


async def _run(path, commands: list) -> CoordMachine:
    """Start the member on `path` (replaying its log), apply `commands`, stop it."""
    machine = CoordMachine()
    parts = open_node(ME, path, machine, [ME], b"secret", OPTIONS)
    await parts.node.start()
    try:
        await _wait_leader(parts.node)
        for cmd in commands:
            await parts.node.propose(encode_command(cmd))
    finally:
        await parts.close()
    return machine


def _unstamp(path) -> None:
    """Make the data dir what coord wrote before log versions: no log_version key."""
    with sqlite3.connect(path / "raft.db") as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (LOG_VERSION_KEY,))
    conn.close()


def _a(machine: CoordMachine) -> tuple[int, int]:
    kv = machine.query(Range(b"a")).kvs[0]
    return kv.create_revision, kv.mod_revision


def test_new_data_is_stamped_and_replays_from_1(tmp_path):
    first = asyncio.run(_run(tmp_path, [Put(b"a", b"1"), Put(b"a", b"2")]))
    assert first.revision == 3 and _a(first) == (2, 3)  # the first write at 2
    again = asyncio.run(_run(tmp_path, []))  # a restart replays the log
    assert again.revision == 3 and _a(again) == (2, 3)
    assert datadir.info(tmp_path).log_version == LOG_VERSION
    assert [r["revision"] for r in datadir.read_rows(tmp_path) if r["kind"] == "put"] == [2, 3]


def test_data_from_before_versions_replays_from_0_and_goes_on_from_there(tmp_path):
    # The same log as the old code wrote (commands carry no revision of their own, but a
    # compaction names one): replayed from 0, as it was applied when written.
    asyncio.run(_run(tmp_path, [Put(b"a", b"1"), Put(b"a", b"2"), Put(b"b", b"1")]))
    _unstamp(tmp_path)
    old = asyncio.run(_run(tmp_path, [Compact(2)]))  # Compact(2): "a" at its value "2"
    assert old.revision == 3 and _a(old) == (1, 2) and old.kv.compact_revision == 2
    assert old.execute(Range(b"a", revision=2)).kvs[0].value == b"2"
    again = asyncio.run(_run(tmp_path, [Put(b"c", b"1")]))  # still version 1 after restarts
    assert again.revision == 4 and again.kv.get(b"c").create_revision == 4
    info = datadir.info(tmp_path)
    assert info.log_version is None
    assert [r["revision"] for r in datadir.read_rows(tmp_path) if r["kind"] == "put"] == [
        1, 2, 3, 4]


def test_a_bad_stamp_is_refused(tmp_path):
    asyncio.run(_run(tmp_path, []))
    with sqlite3.connect(tmp_path / "raft.db") as conn:
        conn.execute("UPDATE meta SET value = 'two' WHERE key = ?", (LOG_VERSION_KEY,))
    conn.close()
    with pytest.raises(NodeError, match="bad log_version 'two'"):
        open_node(ME, tmp_path, CoordMachine(), [ME], b"secret", OPTIONS)
    with pytest.raises(datadir.DataDirError, match="bad log_version"):
        datadir.info(tmp_path)


def test_log_version_of_a_store(tmp_path):
    asyncio.run(_run(tmp_path, []))
    with LogStore(tmp_path / "raft.db") as store:
        assert log_version(store) == LOG_VERSION
    _unstamp(tmp_path)
    with LogStore(tmp_path / "raft.db") as store:
        assert log_version(store) is None
