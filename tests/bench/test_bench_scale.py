"""`coord bench scale`: its tables pair coord with etcd (planted rows), and a short run
on a real cluster prints every figure (the full run is `make bench-scale`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from coord.bench.scale import keys_table, soak_table
from coord.bench.scale_common import Running, decades, running
from coord.bench.scale_owners import owners_table
from coord.bench.scale_pids import pids_table
from coord.bench.scale_restart import restart, restart_table
from coord.bench.scale_sessions import sessions, sessions_table
from coord.client import Client
from coord.testing import LocalCluster
from tests.etcdtools import require


def _scale_json(*flags: str, timeout: float) -> dict:
    """`coord bench scale FLAGS --json` as a real process; its output, once it exits 0."""
    out = subprocess.run([sys.executable, "-m", "coord", "bench", "scale", *flags, "--json"],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _keys_row(system: str, keys: int, per_key: float, p99: float) -> dict:
    return {"system": system, "keys": keys, "load_per_s": 100.0, "rss_max": 50 << 20,
            "disk_max": 1 << 20, "bytes_per_key": per_key, "put_p50_ms": 1.0,
            "put_p99_ms": p99, "get_p50_ms": 1.0, "get_p99_ms": 2.0}


def test_tables_pair_coord_with_etcd_and_show_the_soak_spread():
    made = keys_table([_keys_row("coord", 1000, 300.0, 4.0), _keys_row("etcd", 1000, 100.0,
                                                                      2.0)])
    assert made.notes == ["at 1,000 keys coord/etcd: RSS per key 3.00x, put p99 2.00x"]
    soak = [{"system": "coord", "t_s": float(t), "puts": t * 10, "errors": 0,
             "rss": {"n1": rss}, "disk": {"n1": 1}, "rss_max": rss}
            for t, rss in ((1, 100 << 20), (2, 100 << 20), (3, 110 << 20))]
    assert soak_table(soak).notes[-1].endswith("(+10.0%)")
    assert decades(25_000) == [1000, 10_000, 25_000] and decades(1000) == [1000]


def test_the_keys_rows_take_their_snapshot_time_from_the_members_logs(tmp_path):
    """A real member taking snapshots (the first after 50 entries, the next once the log
    outgrows the last one, 250 entries on at the latest, so before 400 puts end) logs
    each one with its time, and the newest is the one a keys row shows; a member that
    logged none gives none."""
    with LocalCluster(1, data_dir=tmp_path / "c",
                      extra_args=["--snapshot-every", "50"]) as cluster:
        name = cluster.wait_for_leader()
        with Client(cluster.endpoints) as client:
            for i in range(400):
                client.put(f"k{i}", "v")
        run = Running("coord", cluster.members[name].listen, {}, {}, name, {},
                      {name: cluster.members[name].log_path})
        deadline = time.monotonic() + 10
        while (snap := run.last_snapshot()) is None or snap["snapshot_index"] <= 100:
            assert time.monotonic() < deadline, "no second snapshot logged"
            time.sleep(0.05)
    assert snap["snapshot_s"] >= 0 and snap["snapshot_bytes"] > 0
    quiet = tmp_path / "quiet.log"
    quiet.write_text("n1: leader term=2 leader=n1 quorum=yes\n")
    assert Running("coord", "", {}, {}, "n1", {}, {"n1": quiet}).last_snapshot() is None
    row = {**_keys_row("coord", 1000, 300.0, 4.0), **snap}
    assert keys_table([row]).rows[0][-1] == f"{snap['snapshot_s']:.2f}"
    assert keys_table([_keys_row("etcd", 1000, 1.0, 1.0)]).rows[0][-1] == "-"


def _restart_row(system: str, keys: int, serving_s: float, catchup_s: float) -> dict:
    return {"system": system, "keys": keys, "load_per_s": 100.0, "disk_max": 1 << 20,
            "revision": keys // 100 + 1, "restart_serving_s": serving_s,
            "catchup_s": catchup_s, "errors": 0}


def test_the_restart_table_pairs_coord_with_etcd_at_each_size():
    made = restart_table([_restart_row("coord", 1000, 1.2, 0.3),
                          _restart_row("etcd", 1000, 0.4, 0.1),
                          _restart_row("coord", 10_000, 2.0, 1.0)])  # no etcd row: no ratio
    assert made.rows[0] == ["coord", "1,000", "100", "1.0", "11", "1.20", "0.30", "0"]
    assert made.notes == ["at 1,000 keys coord/etcd: restart to serving 3.00x, wiped "
                          "catch-up 3.00x"]
    assert len(made.rows) == 3


@pytest.mark.slow
def test_a_short_restart_run_times_every_decade():
    """Three real members: kill -9 of all of them, then a follower wiped and re-added,
    at 1000 and 1500 keys; every figure is there and positive (speed is not judged)."""
    rows = _scale_json("--no-etcd", "--members", "3", "--phases", "restart", "--keys", "1500",
                       "--concurrency", "4", timeout=120)["restart"]
    assert [(r["system"], r["keys"]) for r in rows] == [("coord", 1000), ("coord", 1500)]
    for r in rows:
        assert r["restart_serving_s"] > 0 and r["catchup_s"] > 0, r
        assert r["revision"] > r["keys"] // 100 and r["disk_max"] > 0 and r["load_per_s"] > 0


# slow, left to `make test-slow`: etcd's side; coord's restart phase runs in make test
@pytest.mark.slow
def test_the_restart_phase_drives_etcd_the_same_way():
    """etcd's side of the phase (kill -9 of every member, a member replaced through
    etcdctl member remove/add --learner/promote) at one size."""
    require("etcd")
    require("etcdctl")
    [row] = restart("etcd", 3, ["--auto-compaction-retention", "0"], 1000, 4)
    assert row["keys"] == 1000 and row["revision"] > 10
    assert row["restart_serving_s"] > 0 and row["catchup_s"] > 0


def test_a_short_run_prints_every_figure():
    result = _scale_json("--no-etcd", "--members", "1", "--seconds", "2", "--sample-s", "1",
                         "--keys", "1500", "--probe-ops", "50", "--concurrency", "4",
                         timeout=120)
    assert [r["keys"] for r in result["keys"]] == [1000, 1500]
    assert all(r["rss_max"] > 0 and r["disk_max"] > 0 and r["put_p99_ms"] > 0
               for r in result["keys"])
    assert result["soak"] and result["soak"][-1]["puts"] > 0
    assert all(len(r["rss"]) == 1 for r in result["soak"])


def _sessions_row(sessions: int, driver: float, expired: int, system: str = "coord") -> dict:
    return {"system": system, "sessions": sessions, "open_per_s": 2000.0,
            "leader_cpu_pct": 40.0, "leader_rss": 100 << 20, "follower_cpu_pct": 5.0,
            "driver_cpu_pct": driver,
            "rss": {"n1": 100 << 20, "n2": 90 << 20, "n3": 90 << 20}, "rss_max": 100 << 20,
            "keepalive_p50_ms": 0.5, "keepalive_p99_ms": 3.0, "keepalives_per_s": 1000.0,
            "sender_late_ms": 0.0, "expired": expired, "not_renewed": 0}


def test_the_sessions_table_names_expiries_and_a_saturated_driver():
    etcd = {**_sessions_row(1000, 20.0, 0, "etcd"), "leader_cpu_pct": 20.0,
            "keepalive_p99_ms": 1.5}
    made = sessions_table([_sessions_row(1000, 20.0, 0), _sessions_row(10_000, 95.0, 3),
                           etcd])
    late = sessions_table([{**_sessions_row(1000, 20.0, 0), "sender_late_ms": 2500.0}])
    assert late.notes[-1].startswith("coord at 1,000 sessions: the driver fell up to 2.5 s "
                                     "behind")
    assert made.text()[1].split() == ["coord", "1,000", "2,000", "40", "5", "20", "100.0",
                                      "90.0", "90.0", "0.50/3.00", "1,000", "0", "0"]
    assert made.notes[0].startswith("coord at 10,000 sessions: 3 expired")
    assert made.notes[1].startswith("coord at 10,000 sessions: the driver used 95% of a core")
    assert made.notes[2] == ("at 1,000 sessions coord/etcd: leader CPU 2.00x, leader RSS "
                             "1.00x, keepalive p99 2.00x")
    assert len(made.notes) == 3


def test_a_short_sessions_run_keeps_every_session_alive():
    """Three real members, 300 native sessions of TTL 3 s renewed every second over the
    multiplexed keepalive streams, spread over the members (so two thirds of them renewed
    through a follower, batched to the leader): every figure is there and positive, none
    expired. A keepalive answered `pending` (the follower's ask to the leader outlasted
    the asker, as it may on a busy machine) is counted, not failed: it is still renewed
    with the next ask, which is what `expired == 0` shows."""
    [row] = _scale_json("--no-etcd", "--members", "3", "--phases", "sessions", "--sessions",
                        "300", "--session-ttl", "3", "--sample-s", "2", "--keepalives-to",
                        "spread", timeout=60)["sessions"]
    assert row["sessions"] == row["alive"] == 300 and row["expired"] == 0, row
    assert row["keepalives_to"] == "spread"
    assert row["errors"] == 0 and row["not_renewed"] < row["sessions"], row
    for k in ("open_per_s", "leader_cpu_pct", "follower_cpu_pct", "driver_cpu_pct", "rss_max",
              "leader_rss", "keepalives_per_s", "keepalive_p50_ms", "keepalive_p99_ms"):
        assert row[k] > 0, (k, row)
    assert len(row["rss"]) == 3 and all(v > 0 for v in row["rss"].values())


# slow, left to `make test-slow`: etcd's side; coord's sessions phase runs in make test
@pytest.mark.slow
def test_the_sessions_phase_drives_etcd_leases_the_same_way():
    """etcd's side: leases granted and kept alive over the same multiplexed streams."""
    require("etcd")
    with running("etcd", 3, ["--auto-compaction-retention", "0"]) as run:
        [row] = asyncio.run(sessions(run, 200, 3.0, 1.5))
    assert row["alive"] == 200 and row["expired"] == 0 and row["errors"] == 0, row
    assert row["keepalive_p99_ms"] > 0 and row["leader_cpu_pct"] > 0 and row["leader_rss"] > 0


def test_a_short_owners_run_grows_the_table_and_measures_each_decade():
    """Three real members grown to 2,000 owned resources: a row per decade with every
    figure there, and the claims really held (the leader's owner count)."""
    rows = _scale_json("--members", "3", "--phases", "owners", "--owners", "2000",
                       "--probe-ops", "64", timeout=90)["owners"]
    assert [r["owned"] for r in rows] == [1000, 2000]
    for r in rows:
        assert r["errors"] == 0 and r["sessions"] == 1, r
        assert r["owned_on_leader"] == r["owned"], r  # the probes' claims were released
        for k in ("own_per_s", "rss_max", "claim_p50_ms", "claim_p99_ms", "batched_own_s"):
            assert r[k] > 0, (k, r)
    assert owners_table(rows).rows[1][0] == "2,000"


# slow, left to `make test-slow`: tests/server/test_pid_capacity.py grows the capacity in make test
@pytest.mark.slow
def test_a_short_pids_run_grows_past_the_default_capacity_and_counts_each_lease():
    """Three real members grown to 70,000 live pid leases, past the default ring of
    65,536 (so the phase's committed capacity is what lets them in): a row per decade,
    and the leader's live count equal to every lease made, probes included."""
    rows = _scale_json("--members", "3", "--phases", "pids", "--pids", "70000",
                       "--probe-ops", "64", timeout=120)["pids"]
    assert [r["leases"] for r in rows] == [1000, 10000, 70000]
    for r in rows:
        assert r["leases_on_leader"] == r["leased"] >= r["leases"], r
        for k in ("lease_per_s", "rss_max", "lease_p50_ms", "lease_p99_ms"):
            assert r[k] > 0, (k, r)
    assert pids_table(rows).rows[2][0] == "70,000"


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, parent in parents.items() if parent == p} - found
        found |= kids
        todo.extend(kids)
    return found


def test_sigterm_stops_a_benchmark_and_the_members_it_started():
    """A benchmark killed with SIGTERM goes through its clean-up as with Ctrl-C: the
    members it started are stopped (they used to keep running)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "coord", "bench", "scale", "--no-etcd", "--members", "3",
         "--phases", "owners", "--owners", "100000000", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(_children(proc.pid)) < 3:  # its three members are up
            assert proc.poll() is None and time.monotonic() < deadline, "no members started"
            time.sleep(0.1)
        members = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while members & _children(1) and time.monotonic() < deadline:
            time.sleep(0.1)  # reparented orphans would show up under init
        alive = {m for m in members if os.path.exists(f"/proc/{m}")
                 and open(f"/proc/{m}/stat").read().split()[2] != "Z"}
        assert not alive, f"members left running: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
