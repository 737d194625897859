"""etcd's Maintenance on real `coord serve` processes: HashKV and Hash equal on every
member at a revision (and different on a member that diverged — the planted case is in
tests/sm/test_kv_hash.py), Snapshot streamed to `etcdctl snapshot save` and `coord
snapshot save`, and `coord snapshot status` reading it back."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import grpc
import pytest

from coord.client import Client
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing import LocalCluster
from tests.etcdtools import etcdctl

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]


def maintenance(endpoint: str):
    ch = grpc.insecure_channel(endpoint)
    return ch, stubs.MaintenanceStub(ch)


def hash_kv_everywhere(endpoints: list[str], revision: int) -> set[tuple[int, int]]:
    """(hash, compact revision) from every member, each retried until it applied
    `revision` (bounded)."""
    out = set()
    for ep in endpoints:
        ch, m = maintenance(ep)
        with ch:
            deadline = time.monotonic() + 10
            while True:
                try:
                    r = m.HashKV(pb.HashKVRequest(revision=revision), timeout=10)
                    out.add((r.hash, r.compact_revision))
                    break
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.OUT_OF_RANGE or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
    return out


def test_members_agree_on_hashes_and_a_snapshot_is_a_checked_backup(etcd_cluster3, tmp_path):
    eps = etcd_cluster3.endpoints
    with grpc.insecure_channel(eps[0]) as ch:
        kv = stubs.KVStub(ch)
        revs = [kv.Put(pb.PutRequest(key=b"mt/%d" % i, value=b"v%d" % i), timeout=10
                       ).header.revision for i in range(50)]
        kv.DeleteRange(pb.DeleteRangeRequest(key=b"mt/1"), timeout=10)
    middle = hash_kv_everywhere(eps, revs[20])
    assert len(middle) == 1, f"members disagree at revision {revs[20]}: {middle}"
    last = hash_kv_everywhere(eps, revs[-1])
    assert len(last) == 1 and last != middle
    assert hash_kv_everywhere(eps, revs[20]) == middle, "a past revision hashes the same later"

    # Hash: the whole state, equal once every member applied the same entries
    deadline = time.monotonic() + 10
    while True:
        hashes = {}
        for ep in eps:
            ch, m = maintenance(ep)
            with ch:
                r = m.Hash(pb.HashRequest(), timeout=10)
                hashes[ep] = (r.header.revision, r.hash)
        if len(set(hashes.values())) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(set(hashes.values())) == 1, hashes

    # Snapshot: etcdctl's and coord's save, checked and read back
    etcd_file = tmp_path / "etcdctl.snap"
    etcdctl(eps[1], "snapshot", "save", str(etcd_file))
    coord_file = tmp_path / "coord.snap"
    subprocess.run([sys.executable, "-m", "coord", "snapshot", "save", str(coord_file),
                    "--endpoints", ",".join(eps)], check=True, capture_output=True,
                   timeout=60)
    for f in (etcd_file, coord_file):
        out = subprocess.run([sys.executable, "-m", "coord", "snapshot", "status", str(f),
                              "--json"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout)
        assert info["revision"] >= revs[-1] and info["keys"] >= 49
    damaged = tmp_path / "damaged.snap"
    damaged.write_bytes(coord_file.read_bytes()[:-1] + b"\0")
    out = subprocess.run([sys.executable, "-m", "coord", "snapshot", "status", str(damaged)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "SHA-256 does not match" in out.stderr


def test_a_new_cluster_restored_from_a_backup_serves_it_and_goes_on(etcd_cluster3, tmp_path):
    """etcd's `snapshot restore`: three data dirs seeded from one backup start as a new
    cluster holding the backed-up state (keys, sessions' keys, revision), then writes go
    on from there; a data dir that holds a log is refused."""
    with Client(etcd_cluster3.endpoints) as c:
        for i in range(20):
            c.put(f"bk/{i}", f"v{i}")
        at = c.get("bk/19").mod_revision
        backup = tmp_path / "backup.snap"
        subprocess.run([sys.executable, "-m", "coord", "snapshot", "save", str(backup),
                        "--endpoints", ",".join(etcd_cluster3.endpoints)], check=True,
                       capture_output=True, timeout=60)
    restored = LocalCluster(3, data_dir=tmp_path / "restored")
    for name, m in restored.members.items():
        out = subprocess.run([sys.executable, "-m", "coord", "snapshot", "restore", str(backup),
                              "--name", name, "--data-dir", str(m.data_dir),
                              "--initial-cluster", restored.initial_cluster],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    again = subprocess.run([sys.executable, "-m", "coord", "snapshot", "restore", str(backup),
                            "--name", "n1", "--data-dir", str(restored.members["n1"].data_dir),
                            "--initial-cluster", restored.initial_cluster],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "already holds a log" in again.stderr
    with restored:
        restored.wait_for_leader()
        with Client(restored.endpoints) as c:
            got = {kv.key.decode(): kv.value.decode() for kv in c.range(prefix="bk/").kvs}
            assert got == {f"bk/{i}": f"v{i}" for i in range(20)}
            assert c.put("bk/new", "after").header.revision > at
            for m in restored.members.values():
                with Client([m.listen]) as one:
                    assert one.get("bk/3", serializable=True).value == b"v3"


def test_alarms_are_etcds_one_per_member_and_member_0_is_one(coord_cluster):
    """etcd 3.4's Alarm, as python-etcd3's own suite drives it: `create_alarm()` raises
    NOSPACE for member 0 and expects it listed beside a real member's; each member's
    alarm is raised and lowered on its own, and an answer names the alarm changed."""
    ch, m = maintenance(coord_cluster.etcd_endpoints[0])
    with ch:
        me = m.Status(pb.StatusRequest(), timeout=10).header.member_id
        req = pb.AlarmRequest

        def alarm(action: int, member: int = 0, kind: int = pb.NOSPACE) -> list[tuple]:
            r = m.Alarm(req(action=action, memberID=member, alarm=kind), timeout=10)
            return sorted((a.memberID, a.alarm) for a in r.alarms)

        assert alarm(req.ACTIVATE) == [(0, pb.NOSPACE)]
        assert alarm(req.ACTIVATE, me) == [(me, pb.NOSPACE)]
        assert alarm(req.ACTIVATE) == [(0, pb.NOSPACE)]  # already up: the same, no error
        assert alarm(req.GET, kind=pb.NONE) == sorted([(0, pb.NOSPACE), (me, pb.NOSPACE)])
        kv = stubs.KVStub(ch)
        with pytest.raises(grpc.RpcError) as refused:
            kv.Put(pb.PutRequest(key=b"alarm/k", value=b"v"), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert alarm(req.DEACTIVATE, kind=pb.NONE) == []  # lowers nothing, as etcd
        assert alarm(req.DEACTIVATE) == [(0, pb.NOSPACE)]
        assert alarm(req.GET, kind=pb.NONE) == [(me, pb.NOSPACE)]  # the member's stays up
        assert alarm(req.DEACTIVATE) == []  # it was not up
        assert alarm(req.DEACTIVATE, me) == [(me, pb.NOSPACE)]
        assert alarm(req.GET, kind=pb.NONE) == []
        kv.Put(pb.PutRequest(key=b"alarm/k", value=b"v"), timeout=10)
        # `etcdctl alarm disarm` lowers every alarm: it lists them and lowers each
        alarm(req.ACTIVATE)
        alarm(req.ACTIVATE, me)
        etcdctl(coord_cluster.etcd_endpoints[0], "alarm", "disarm")
        assert alarm(req.GET, kind=pb.NONE) == []
