"""coord.chaos.netns on real member processes: a minority member cut off in its own
network namespace serves stale reads (flagged read-only) that the recorded oplog
shows and the linearizability check catches once the flag is ignored; the isolated
leader is replaced; every namespace is gone afterwards."""

from __future__ import annotations

import subprocess

import pytest

from coord.chaos.netns import Network, available, namespaces_of
from coord.chaos.recorder import Process, Recorder
from coord.chaos.workloads import Register
from coord.check.oplog import read_jsonl
from coord.check.registers import check_registers
from coord.client import Client
from coord.testing import LocalCluster
from tests.cut_off import wait_until

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(bool(available()), reason=available() or "ok")]


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_a_runs_namespaces_are_found_by_its_whole_pid():
    """What the chaos run's clean-up assertion reads: a pid over 100,000 (pid_max goes
    to 4,194,304) names its namespaces in full, and a longer pid that starts the same is
    another run's."""
    pid = 4_000_123
    mine, other = f"cch{pid}-n1", f"cch{pid}7-n1"
    try:
        for ns in (mine, other):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        assert namespaces_of(pid) == [mine]
    finally:
        for ns in (mine, other):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert namespaces_of(pid) == []


def test_a_failed_create_removes_what_it_made():
    """The second member's namespace already exists: create() fails and removes the
    hub and the first member's namespace it had made (and the one in its way)."""
    subprocess.run(["ip", "netns", "add", "cct16f-n2"], check=True)
    net = Network(["n1", "n2"], tag="cct16f")
    with pytest.raises(Exception, match="cct16f-n2"):
        net.create()
    assert "cct16f" not in _namespaces()


def test_namespaces_of_a_dead_run_are_swept_and_a_live_runs_are_kept():
    """A run killed with no chance to clean up (kill -9, a machine restart) leaves its
    namespaces and members: the next run removes them, and stops what runs inside."""
    from coord.chaos.netns import sweep_dead_runs

    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that was a process and is not any more
    mine = f"cch{__import__('os').getpid()}-n1"
    stale = f"cch{dead.pid}-n1"
    for ns in (mine, stale):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    orphan = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "60"])
    try:
        wait_until("the orphan runs in the stale namespace", lambda: subprocess.run(
            ["ip", "netns", "pids", stale], capture_output=True, text=True).stdout.strip() != "")
        assert sweep_dead_runs() == [stale]
        assert orphan.wait(timeout=10) == -9
        listed = _namespaces()
        assert stale not in listed and mine in listed
    finally:
        orphan.kill()
        for ns in (mine, stale):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_partitioned_minority_gives_stale_reads_the_checker_catches(tmp_path):
    net = Network(["n1", "n2", "n3"], tag="cct16").create()
    cluster = LocalCluster(3, data_dir=tmp_path / "d")
    try:
        net.attach(cluster)
        cluster.start(timeout=30)
        leader = cluster.wait_for_leader(30)
        minority = next(n for n in cluster.members if n != leader)
        majority = [n for n in cluster.members if n != minority]
        recorder = Recorder(tmp_path / "oplog.jsonl")
        reg = Register(hot_keys=1)
        pinned = Client([cluster.members[minority].listen], read_only_ok=True, timeout=3)
        writer = Client([cluster.members[n].listen for n in majority], timeout=3)
        reader, write = Process(recorder, 0, 2), Process(recorder, 1, 2)
        key = "chaos/reg/0/0"
        try:
            write.invoke("write", key, 1)
            writer.put(key, "1")
            write.ok(1)
            wait_until("the minority applied 1", lambda: pinned.get(key) is not None)
            net.split([minority], majority)
            wait_until(f"{minority} read-only",
                       lambda: cluster.status(minority).mode == "read-only")
            write.invoke("write", key, 2)
            writer.put(key, "2")
            write.ok(2)
            reg.read(reader, pinned, key)  # stale, flagged
            # the leader, isolated in turn, is replaced; writes go on at the new one
            net.heal()
            wait_until(f"{minority} read-write",
                       lambda: cluster.status(minority).mode == "read-write")
            old = cluster.wait_for_leader(30)
            net.split([old], [n for n in cluster.members if n != old])
            new = cluster.wait_for_leader(30, among=[n for n in cluster.members if n != old])
            assert new != old
            net.heal()
            reg.read(reader, writer, key)
        finally:
            pinned.close()
            writer.close()
            recorder.close()
    finally:
        cluster.stop()
        net.destroy()
    assert "cct16" not in _namespaces()

    rows = read_jsonl(tmp_path / "oplog.jsonl")
    reads = [r for r in rows if r["f"] == "read" and r["type"] == "ok"]
    assert [(r["value"], r.get("read_only", False)) for r in reads] == [(1, True), (2, False)]
    assert check_registers(rows).ok  # a flagged read promised no recency
    unflagged = [{k: v for k, v in r.items() if k != "read_only"} for r in rows]
    result = check_registers(unflagged)
    assert result.verdict == "illegal"
    assert "read of 1" in result.violations[0]["message"]
