"""A live export and a member cut off from the majority (three `coord serve` processes,
one partitioned off by coord.testing.netfault gates while the other two keep a quorum
and commit): by default the cut-off member refuses and the export goes to the majority;
with `--read-only-ok` it serves its committed prefix with every page flagged, the CLI
warns and records it in the manifest and the summary, `--follow` keeps going flagged and
moves to a member with a quorum (or goes on unflagged once its member rejoins). A healthy
export is not flagged."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coord.client import Client
from coord.history.sink import committed_files, read_manifest
from coord.testing import LocalCluster
from tests.cut_off import mode_of, wait_until

DURING = 5  # puts the majority commits while the member is cut off


def _export(endpoints: list[str], out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coord", "history", "export", "--endpoints", ",".join(endpoints),
         "--out", str(out), "--format", "jsonl", *extra],
        capture_output=True, text=True, timeout=60)


def _follow(endpoints: list[str], out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "coord", "history", "export", "--endpoints", ",".join(endpoints),
         "--out", str(out), "--format", "jsonl", "--follow", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rows(out: Path) -> list[dict]:
    """The committed rows, in the order the runs were committed."""
    if _manifest(out) is None:
        return []
    return [json.loads(x) for p in committed_files(out)[1] for x in Path(p).read_text().split()]


def _during(out: Path) -> int:
    return sum(r.get("key") == "during" and r["kind"] == "kv.put" for r in _rows(out))


def _manifest(out: Path) -> dict | None:
    return read_manifest(out) if (out / "_coord_history.json").exists() else None


def _stop(proc: subprocess.Popen) -> tuple[int, str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    return proc.returncode, stdout, stderr


def _one_line(text: str) -> str:
    return " ".join(text.split())


# slow, left to `make test-slow`: the audit's read-only note is checked in make test (tests/audit)
@pytest.mark.slow
def test_a_cut_off_member_refuses_or_flags_the_export(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c", partitionable=True) as cluster:
        leader = cluster.wait_for_leader()
        cut = next(n for n in cluster.members if n != leader)
        on_cut = cluster.members[cut].listen
        majority = [cluster.members[n].listen for n in cluster.members if n != cut]
        with Client(majority, timeout=2.0) as writer, \
                Client([on_cut], read_only_ok=True, timeout=2.0) as pinned:
            for i in range(10):
                writer.put(b"before", b"%d" % i)
            wait_until("the member has every put", lambda: pinned.get(b"before").value == b"9")

            healthy = _export([on_cut, *majority], tmp_path / "healthy", "--read-only-ok")
            assert healthy.returncode == 0, healthy.stderr
            summary = json.loads(healthy.stdout)
            assert summary["read_only"] == [] and summary["stale"] is False
            assert "read_only" not in read_manifest(tmp_path / "healthy")
            assert "warning" not in healthy.stderr

            # A following export on the member, begun while it has its quorum: once cut
            # off, the member refuses it mid-stream and it goes on at the majority.
            refused_out = tmp_path / "follow-refused"
            follow_refused = _follow([on_cut, *majority], refused_out)
            try:
                wait_until("the following export committed",
                           lambda: (_manifest(refused_out) or {}).get("last_index", 0) > 0)
                cluster.cut_off(cut)
                wait_until("the member is read-only",
                           lambda: mode_of(cluster, cut) == "read-only")
                for i in range(DURING):
                    writer.put(b"during", b"%d" % i)
                wait_until("the refused export has the majority's puts",
                           lambda: _during(refused_out) == DURING)
            finally:
                refused_result = _stop(follow_refused)
            code, stdout, stderr = refused_result
            assert code == 0, stderr
            summary = json.loads(stdout)
            assert summary["read_only"] == [] and summary["stale"] is False
            assert "warning" not in stderr and "read_only" not in _manifest(refused_out)
            stale_commit = pinned.range(b"before").header.revision
            assert stale_commit < writer.range(b"during").header.revision

            # Default: the cut-off member refuses; alone, the export stops saying why.
            alone = _export([on_cut], tmp_path / "refused")
            assert alone.returncode == 1, alone.stdout + alone.stderr
            assert "NO_QUORUM" in alone.stderr and "--read-only-ok" in alone.stderr
            # ... and with the others given, it goes to the majority: everything, unflagged.
            moved = _export([on_cut, *majority], tmp_path / "majority")
            assert moved.returncode == 0, moved.stderr
            summary = json.loads(moved.stdout)
            assert summary["read_only"] == [] and summary["stale"] is False
            assert _during(tmp_path / "majority") == DURING

            # --read-only-ok, the cut-off member alone: its prefix, flagged everywhere.
            stale = _export([on_cut], tmp_path / "stale", "--read-only-ok")
            assert stale.returncode == 0, stale.stderr
            summary = json.loads(stale.stdout)
            assert summary["stale"] is True and summary["last_index"] > 0
            [episode] = summary["read_only"]
            assert episode["member"] == cut and episode["quorum_lost_ms"] > 0
            assert episode["commit_index"] == summary["last_index"]
            err = _one_line(stale.stderr)
            assert f"warning: member {cut} has no quorum (cut off for" in err
            assert f"the export ends with entries served by member {cut} without a quorum" in err
            manifest = read_manifest(tmp_path / "stale")
            assert manifest["read_only"]["member"] == cut
            assert manifest["runs"][-1]["read_only"]["member"] == cut
            assert _during(tmp_path / "stale") == 0  # the majority's puts are past its prefix

            # --read-only-ok, the cut-off member first, the majority given too: it starts
            # flagged there, then the client finds a member with a quorum and it goes on.
            found = _export([on_cut, *majority], tmp_path / "found", "--read-only-ok")
            assert found.returncode == 0, found.stderr
            summary = json.loads(found.stdout)
            assert [e["member"] for e in summary["read_only"]] == [cut]
            assert summary["stale"] is False and "read_only" not in _manifest(tmp_path / "found")
            assert _during(tmp_path / "found") == DURING
            assert "serves the export with a quorum" in _one_line(found.stderr)

            # --follow --read-only-ok: on the cut-off member alone it keeps going, flagged,
            # and unflagged once the member rejoins; given the majority too, it moves there.
            pinned_out, moving_out = tmp_path / "follow-pinned", tmp_path / "follow-moving"
            follow_pinned = _follow([on_cut], pinned_out, "--read-only-ok")
            follow_moving = _follow([on_cut, *majority], moving_out, "--read-only-ok")
            try:
                wait_until("the moving export has the majority's puts",
                      lambda: _during(moving_out) == DURING)
                wait_until("its manifest no longer says read-only",
                      lambda: "read_only" not in (_manifest(moving_out) or {"read_only": 1}))
                wait_until("the pinned export says read-only in its manifest",
                      lambda: (_manifest(pinned_out) or {}).get("read_only") is not None)
                time.sleep(1.5)  # a heartbeat or more later, it still runs, still flagged
                assert follow_pinned.poll() is None and _during(pinned_out) == 0
                assert _manifest(pinned_out)["read_only"]["member"] == cut

                cluster.heal(cut)
                wait_until("the pinned export has the majority's puts",
                      lambda: _during(pinned_out) == DURING)
                wait_until("its manifest no longer says read-only",
                      lambda: "read_only" not in _manifest(pinned_out))
            finally:
                pinned_result = _stop(follow_pinned)
                moving_result = _stop(follow_moving)

    code, stdout, stderr = moving_result
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert [e["member"] for e in summary["read_only"]] == [cut] and summary["stale"] is False
    err = _one_line(stderr)
    assert f"warning: member {cut} has no quorum" in err
    assert "serves the export with a quorum" in err
    assert _manifest(moving_out)["runs"][0]["read_only"]["member"] == cut

    code, stdout, stderr = pinned_result
    assert code == 0, stderr
    summary = json.loads(stdout)
    [episode] = summary["read_only"]
    assert episode["member"] == cut and episode["pages"] >= 2  # heartbeats flagged too
    assert summary["stale"] is False
    err = _one_line(stderr)
    assert f"warning: member {cut} has no quorum" in err
    assert f"member {cut} serves the export with a quorum" in err
    for out in (tmp_path / "found", refused_out, pinned_out, moving_out):  # once, in order
        entries = [r["index"] for r in _rows(out) if r["seq"] == 0]
        assert entries == list(range(entries[0], entries[-1] + 1))

