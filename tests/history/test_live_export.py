"""The live export: a running member replays what it retains and streams the rows
(History.Export through coord.client), the same rows the offline reader gets from its
data dir once it is stopped; compacted starts refused with the oldest available revision;
`--follow` streams entries as they commit; the CLI resumes from its manifest."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

import coord.testing
from coord.cli.main import main
from coord.client import Client, CompactedError
from coord.client.history import HistoryCursor
from coord.history import datadir
from coord.history.sink import committed_files, read_manifest
from coord.server.storage.log_format import db_path
from coord.server.storage.log_reader import LogReader
from coord.v1 import history_pb2
from tests.history.leader_note import wait_for_the_leader_note


def _plain(rows):
    """Rows without their null columns (the wire has no nulls: an unset field is one)."""
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


def _load(client: Client) -> None:
    for i in range(60):
        client.put(b"k%d" % (i % 7), b"v%d" % i)
    with client.session(ttl=5) as s:
        s.own("orders", ["p0", "p1"])
    client.allocate_pid_block("w", 10)
    client.init_producer("tx-1")
    client.delete(b"k1")


@pytest.fixture(scope="module")
def member(tmp_path_factory):
    """One real member (in-process, its gRPC server and SQLite log) that snapshots and
    compacts every 40 entries."""
    root = tmp_path_factory.mktemp("live")
    with coord.testing.LocalCluster(members=1, data_dir=root, in_process=True,
                                    extra_args=["--snapshot-every", "40"]) as c:
        with Client(c.endpoints) as client:
            _load(client)
            wait_for_the_leader_note(client)
        yield c



def test_live_rows_are_the_offline_rows_and_follow_streams_new_entries(member, tmp_path):
    with Client(member.endpoints) as client:
        pages = list(client.export_history(page_entries=7))
        assert pages[-1].done and all(not p.done for p in pages[:-1])
        assert len(pages) > 2  # paged, every entry's rows in one page
        live = [r for p in pages for r in p.rows]
        assert live[0]["index"] == pages[0].snapshot_index + 1 > 1  # from the snapshot on
        # Up to the commit index the export began at (the first page's); the leader may
        # commit more (a session sweep) before the last page.
        assert live[-1]["index"] == pages[0].commit_index

        # --follow: caught up, then each new entry as it commits.
        stream = client.export_history(after_index=live[-1]["index"], follow=True)
        first = next(stream)
        assert first.caught_up and not first.done
        # The leader's own entries (a session sweep, a time note) may commit between the
        # export and the follow: they arrive in the first page.
        followed: list[dict] = list(first.rows)
        done = threading.Event()

        def write():
            with Client(member.endpoints) as writer:
                for i in range(5):
                    writer.put(b"followed", b"%d" % i)
            done.set()

        threading.Thread(target=write, daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            page = next(stream)
            followed += page.rows
            if done.is_set() and len([r for r in followed if r["kind"] == "kv.put"]) == 5:
                break
        stream.close()
        assert [r["key"] for r in followed if r["kind"] == "kv.put"] == ["followed"] * 5
        assert followed[0]["index"] == live[-1]["index"] + 1

    member.stop()
    offline = _plain(datadir.read_rows(member.members["n1"].data_dir))
    exported = live + followed
    # The same entries give the same rows (the member may have snapshotted since: compare
    # what both hold; the followed entries at least are in both).
    common = {r["index"] for r in exported} & {r["index"] for r in offline}
    assert {r["index"] for r in followed} <= common and len(common) > 20
    assert [r for r in exported if r["index"] in common] == [
        r for r in offline if r["index"] in common]
    assert {r["kind"] for r in live} >= {"put", "kv.put", "own", "owner.grant", "open_session",
                                         "allocate_pid_block", "init_producer", "delete_range"}
    member.start()


def test_compacted_starts_are_refused_with_the_oldest_available(member):
    with Client(member.endpoints) as client:
        first = next(client.export_history())
        snap_index = first.snapshot_index
        assert snap_index >= 40
        with pytest.raises(CompactedError) as info:
            list(client.export_history(from_revision=1))
        meta = info.value.metadata
        assert int(meta["oldest_index"]) == snap_index + 1
        # rows after the snapshot are at its revision or later (an entry that moves no
        # revision stays at it: so only the next revision on is complete)
        compact = int(meta["compact_revision"])
        assert 1 < compact == int(meta["oldest_revision"]) - 1
        assert min(r["revision"] for r in first.rows) >= compact
        assert "member n1" in info.value.message and "oldest available revision" in str(
            info.value)
        with pytest.raises(CompactedError):
            list(client.export_history(after_index=3))
        # the oldest available revision itself is accepted
        rows = [r for p in client.export_history(from_revision=int(meta["oldest_revision"]))
                for r in p.rows]
        assert rows and min(r["revision"] for r in rows) >= int(meta["oldest_revision"])


def test_a_follower_left_behind_by_a_compaction_is_told_not_given_a_gap(member):
    data_dir = member.members["n1"].data_dir
    log = datadir.MemberLog(LogReader(db_path(data_dir), live=True), label="member n1")
    try:
        log.step(max_entries=1)
        with Client(member.endpoints) as client:
            for i in range(90):  # two snapshots (every 40 entries) pass our position
                client.put(b"c", b"%d" % i)
        with pytest.raises(datadir.Compacted, match="member n1: compacted to index"):
            log.step()
    finally:
        log.close()


def test_cli_exports_live_resumes_and_refuses_bad_input(member, tmp_path, capsys):
    out = tmp_path / "h"
    endpoints = ",".join(member.endpoints)
    args = ["history", "export", "--endpoints", endpoints, "--out", str(out), "--format",
            "jsonl"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    manifest = read_manifest(out)
    assert report["last_index"] == manifest["last_index"] > 0 and report["rows"] > 0
    with Client(member.endpoints) as client:
        client.put(b"after", b"1")
    assert main(args) == 0  # resumes after the manifest's last index
    captured = capsys.readouterr()
    assert f"resuming after index {manifest['last_index']}" in captured.err
    again = json.loads(captured.out)
    assert again["first_index"] == manifest["last_index"] + 1
    lines = [json.loads(x) for p in sorted(out.glob("*.jsonl")) for x in p.read_text().split()]
    assert len({(r["index"], r["seq"]) for r in lines}) == len(lines)  # nothing twice
    assert main(["history", "export", "--endpoints", endpoints, "--out", str(tmp_path / "x"),
                 "--from-revision", "1"]) == 2
    assert "the oldest available revision is" in capsys.readouterr().err
    assert main(["history", "export", "--data-dir", str(tmp_path), "--out", str(tmp_path / "y"),
                 "--follow"]) == 2
    assert "--follow needs --endpoints" in capsys.readouterr().err


def test_cursor_resumes_after_the_last_entry_it_delivered():
    """A stream reopened on another member asks for what follows the rows delivered, and
    drops any the new member repeats."""
    cursor = HistoryCursor(after_index=10, from_revision=5, follow=True)
    assert cursor.request().after_index == 10

    def page(*indexes):
        return history_pb2.ExportHistoryPage(rows=[
            history_pb2.HistoryRow(index=i, seq=0, revision=i, kind="put") for i in indexes])

    assert [r["index"] for r in cursor.feed(page(11, 12))[0].rows] == [11, 12]
    req = cursor.request()
    assert (req.after_index, req.from_revision, req.follow) == (12, 5, True)
    assert [r["index"] for r in cursor.feed(page(12, 13))[0].rows] == [13]
    assert cursor.feed(page())[0].rows == [] and cursor.request().after_index == 13


def test_an_export_survives_its_member_being_killed(tmp_path):
    """Three member processes; a following export's member is killed after its first
    page, then more entries commit: only another member can deliver them, replaying from
    its own snapshot and going on after the last entry delivered — every entry once, in
    order, whatever the dead member had already sent."""
    with coord.testing.cluster(members=3, data_dir=tmp_path) as c, \
            Client(c.endpoints) as client:
        for t in range(20):  # entries of 100 puts each: ~100 rows a page
            txn = client.txn()
            for i in range(100):
                txn.then_put(b"t%02d/%03d" % (t, i), b"v")
            txn.commit()
        pages = client.export_history(follow=True, page_entries=1)
        got = [next(pages)]
        c.kill(got[0].member)
        for i in range(5):
            client.put(b"after-kill", b"%d" % i)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got.append(next(pages))
            if sum(r.get("key") == "after-kill" and r["kind"] == "kv.put"
                   for p in got for r in p.rows) == 5:
                break
        pages.close()
    rows = [r for p in got for r in p.rows]
    assert {p.member for p in got} - {got[0].member}  # another member took over
    assert sum(r.get("key") == "after-kill" and r["kind"] == "kv.put" for r in rows) == 5
    entries = [r["index"] for r in rows if r["seq"] == 0]
    assert entries == list(range(entries[0], entries[-1] + 1))  # every entry once, in order
    assert len({(r["index"], r["seq"]) for r in rows}) == len(rows)
    assert sum(r["kind"] == "kv.put" and r["key"].startswith("t") for r in rows) == 2_000


def test_the_wire_row_is_the_schema():
    """HistoryRow's fields are the schema's columns, same names, order and types."""
    from coord.history.schema import COLUMNS

    kinds = {"int64": "TYPE_INT64", "int32": "TYPE_INT32", "string": "TYPE_STRING",
             "bool": "TYPE_BOOL"}
    fields = history_pb2.HistoryRow.DESCRIPTOR.fields
    assert [(f.name, f.type) for f in fields] == [
        (name, getattr(f.__class__, kinds[t])) for (name, t, _), f in zip(COLUMNS, fields,
                                                                          strict=True)]


def _drained(said: queue.Queue[str]) -> list[str]:
    """What the export printed on stderr that nobody read yet (for a failure's message)."""
    lines: list[str] = []
    while not said.empty() and len(lines) < 1000:
        lines.append(said.get_nowait())
    return lines


def test_an_export_waits_for_a_slot_on_a_member_busy_with_others(member, tmp_path):
    """A member serving as many exports as it may refuses another (LIMIT_EXCEEDED): the
    CLI says so, asks again and exports once a slot frees, rather than failing."""
    with Client(member.endpoints) as client:
        running = [client.export_history(follow=True) for _ in range(2)]
        for stream in running:
            assert next(stream).member == "n1"  # both slots taken
        proc = subprocess.Popen(
            [sys.executable, "-m", "coord", "history", "export", "--endpoints",
             ",".join(member.endpoints), "--out", str(tmp_path / "h"), "--format", "jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            said: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda: [said.put(line) for line in proc.stderr],
                             daemon=True).start()
            lines = [said.get(timeout=60)]  # what it says first: why it waits
            assert "already serving 2 exports" in lines[0], lines
            assert "(waiting up to 60 s for a slot)" in lines[0], lines
            assert proc.poll() is None  # still waiting, not failed
            running[0].close()
            out, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
            for stream in running:
                stream.close()
    assert proc.returncode == 0, (out, _drained(said))
    assert json.loads(out)["rows"] > 0


def test_cli_follow_commits_as_entries_arrive_and_on_ctrl_c(member, tmp_path):
    """`--follow` commits what arrived at least every second (the manifest moves while
    it runs), compacts its small runs (every 2 here), and Ctrl-C commits, prints the
    summary and exits 0. Ctrl-C comes once the compaction was reported: sent earlier it
    could cut the compaction short."""
    out = tmp_path / "f"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coord", "history", "export", "--endpoints",
         ",".join(member.endpoints), "--out", str(out), "--format", "jsonl", "--follow",
         "--compact-runs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [said.put(line) for line in proc.stderr], daemon=True).start()
    stderr: list[str] = []

    def printed(text):
        """Read the export's stderr until a line says `text` (for at most 30 s)."""
        deadline = time.monotonic() + 30
        while not any(text in line for line in stderr):
            try:
                stderr.append(said.get(timeout=max(deadline - time.monotonic(), 0)))
            except queue.Empty:
                raise AssertionError(f"the export never said {text!r}: {stderr}") from None

    try:
        def manifest_after(index):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = read_manifest(out) if (out / "_coord_history.json").exists() else None
                if m and m["last_index"] >= index:
                    return m
                assert proc.poll() is None, (proc.communicate()[0], _drained(said))
                time.sleep(0.1)
            raise AssertionError(f"the manifest never reached index {index}")

        with Client(member.endpoints) as client:
            first = manifest_after(1)["last_index"]
            client.put(b"followed-cli", b"1")
            last = next(p for p in client.export_history(after_index=first)
                        if p.done).replayed_index  # the commit index now
        manifest = manifest_after(last)  # committed while it runs, before any Ctrl-C
        # the first run and the put's, compacted into one while it runs
        printed("compacted 2 runs (2 files) into one (1 files)")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        stdout = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["last_index"] >= manifest["last_index"] >= last
    assert any("committed through index" in line for line in stderr)
    final = read_manifest(out)
    assert any(len(r.get("compacted_from", ())) >= 2 for r in final["runs"])
    rows = [json.loads(x) for p in committed_files(out)[1] for x in open(p).read().split()]
    assert any(r.get("key") == "followed-cli" for r in rows)
    entries = [r["index"] for r in rows if r["seq"] == 0]
    assert entries == list(range(entries[0], entries[-1] + 1))  # once each, in order


def test_a_member_serves_at_most_two_exports_at_once(member):
    from coord.client import LimitExceededError

    with Client(member.endpoints) as client:
        running = [client.export_history(follow=True) for _ in range(2)]
        for stream in running:
            assert next(stream).member == "n1"
        with pytest.raises(LimitExceededError, match="already serving 2 exports"):
            next(client.export_history())
        for stream in running:
            stream.close()
        deadline = time.monotonic() + 10  # the member notices the cancellations soon
        while True:  # a slot is free again
            try:
                assert next(client.export_history()).member == "n1"
                break
            except LimitExceededError:
                assert time.monotonic() < deadline, "no export slot freed within 10 s"
                time.sleep(0.05)
