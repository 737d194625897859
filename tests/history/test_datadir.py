"""The offline export: a stopped member's data dir, opened read-only, replayed from its
snapshot through the real state machine; and `coord history export` around it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3

import pytest

import coord.testing
from coord.cli.main import main
from coord.client import Client
from coord.history import datadir
from coord.history.sink import committed_files
from tests.history.leader_note import wait_for_the_leader_note


def _digest(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def stopped_member(tmp_path_factory):
    """One real member that snapshotted (every 50 entries) and compacted its log, its
    leader noted in the log, then stopped: (its data dir, what the client saw)."""
    root = tmp_path_factory.mktemp("member")
    seen = {}
    with coord.testing.LocalCluster(members=1, data_dir=root, in_process=True,
                                    extra_args=["--snapshot-every", "50"]) as c:
        with Client(c.endpoints) as client:
            for i in range(80):
                client.put(b"k%d" % (i % 7), b"v%d" % i)
            with client.session(ttl=5) as s:
                seen["grants"] = s.own("orders", ["p0", "p1"]).grants
                seen["session"] = s.id
            seen["block"] = client.allocate_pid_block("w", 10)
            seen["last"] = client.put(b"last", b"x").header.revision
            wait_for_the_leader_note(client)
        c.stop()
        yield c.members["n1"].data_dir, seen


def test_rows_from_the_snapshot_on_match_what_the_client_was_told(stopped_member):
    data_dir, seen = stopped_member
    before = _digest(data_dir)
    info = datadir.info(data_dir)
    assert info.member == "n1" and info.snapshot_index >= 50
    rows = list(datadir.read_rows(data_dir))
    assert _digest(data_dir) == before  # read-only: not a byte changed
    assert rows[0]["index"] == info.snapshot_index + 1
    assert rows[-1]["index"] == info.commit_index
    grants = [r for r in rows if r["kind"] == "owner.grant"]
    assert [(g["resource"], g["generation"], g["revision"], g["session"]) for g in grants] == [
        (g.resource, g.generation, g.revision, seen["session"]) for g in seen["grants"]]
    block = next(r for r in rows if r["kind"] == "allocate_pid_block")
    assert (block["pid"], block["size"]) == (seen["block"].start, 10)
    assert max(r["revision"] for r in rows) == seen["last"]
    # Every row knows its leader: from the note kept in the snapshot if the leader named
    # itself before it, else from the note in the log (the term's earlier rows wait for it).
    assert len([r for r in rows if r["kind"] == "note_leader"]) <= 1
    assert {r["leader"] for r in rows} == {"n1"}


def _snapshot_gone_for(log: datadir.MemberLog, times: int) -> list[object]:
    """The snapshot file is gone for the log's first `times` reads (a live member removed
    it after its newer snapshot's row, which the reader's transaction does not see yet):
    the odd reads find it gone as the row is read, the even ones as the file is opened.
    The reads it made."""
    real, reads = log.reader.snapshot, []
    path = real().data.path
    away = path.with_name("away.snap")

    def snapshot():
        reads.append(len(reads) + 1)
        if len(reads) > times:
            return real()
        if len(reads) % 2:
            path.rename(away)
            try:
                return real()
            finally:
                away.rename(path)
        snap = real()
        gone = dataclasses.replace(snap.data, path=path.with_name("gone.snap"))
        return dataclasses.replace(snap, data=gone)

    log.reader.snapshot = snapshot  # type: ignore[method-assign]
    return reads


def test_a_snapshot_file_removed_under_the_reader_is_read_again(stopped_member):
    data_dir, _ = stopped_member
    expected = list(datadir.read_rows(data_dir))
    log = datadir.MemberLog(datadir.open_log(data_dir))
    reads = _snapshot_gone_for(log, datadir.SNAPSHOT_READS - 1)
    rows: list = []
    try:
        for _ in range(1_000):  # pages; far more than the history has
            if log.caught_up:
                break
            rows += log.step()
        rows += log.flush()
    finally:
        log.close()
    assert len(reads) == datadir.SNAPSHOT_READS and rows == expected
    log = datadir.MemberLog(datadir.open_log(data_dir))
    _snapshot_gone_for(log, datadir.SNAPSHOT_READS)
    try:
        with pytest.raises(datadir.DataDirError, match="snapshot's file was removed 3 times"):
            log.step()
    finally:
        log.close()


def test_export_cli_writes_resumes_and_refuses_what_it_cannot_read(stopped_member, tmp_path,
                                                                   capsys):
    data_dir, _ = stopped_member
    out = tmp_path / "h"
    assert main(["history", "export", "--data-dir", str(data_dir), "--out", str(out),
                 "--format", "jsonl"]) == 0
    report = json.loads(capsys.readouterr().out)
    info = datadir.info(data_dir)
    assert report["last_index"] == info.commit_index
    assert main(["history", "export", "--data-dir", str(data_dir), "--out", str(out),
                 "--format", "jsonl"]) == 0  # nothing new: resumes after the last index
    captured = capsys.readouterr()
    assert "resuming after index" in captured.err and json.loads(captured.out)["rows"] == 0
    assert len(committed_files(out)[1]) == 1
    assert main(["history", "export", "--data-dir", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "x")]) == 2
    assert "no such file" in capsys.readouterr().err
    # a revision the snapshot swallowed is refused, naming the oldest available
    assert main(["history", "export", "--data-dir", str(data_dir), "--out",
                 str(tmp_path / "r"), "--from-revision", "1"]) == 2
    assert "the oldest available revision is" in capsys.readouterr().err


def test_a_file_of_an_unknown_schema_version_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    conn = sqlite3.connect(d / "raft.db")
    conn.execute("PRAGMA user_version = 9")
    conn.commit()
    conn.close()
    with pytest.raises(datadir.DataDirError, match="schema version 9"):
        datadir.info(d)
