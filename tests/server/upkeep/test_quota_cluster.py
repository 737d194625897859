"""The space quota on real `coord serve` processes: fill a 3-member cluster to its quota,
writes are refused with NO_SPACE (native and etcd API), the alarm shows in `coord
status` and etcd's Maintenance.Alarm, reads and deletes work, a member restarted at
the quota comes back with the alarm, and once space is freed the alarm lowers itself
and writes resume with nothing acknowledged lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import grpc
import pytest

from coord.client import Client, NoSpaceError
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster

QUOTA = 1_000_000
VALUE_BYTES = 8 * 1024


def alarms(cluster: LocalCluster, name: str) -> list[str]:
    return json.loads(cluster.status(name).state_machine)["alarms"]


def usage(cluster: LocalCluster) -> dict[str, tuple]:
    """Each member's alarms, state estimate and store bytes in use (for failures)."""
    out = {}
    for name, m in cluster.members.items():
        sm = json.loads(cluster.status(name).state_machine)
        with grpc.insecure_channel(m.listen) as ch:
            st = stubs.MaintenanceStub(ch).Status(pb.StatusRequest(), timeout=10)
        out[name] = (sm["alarms"], sm["state_bytes"], st.dbSizeInUse)
    return out


def wait_for(what: str, cond, limit_s: float, cluster: LocalCluster) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {limit_s}s: {usage(cluster)}")


def test_fill_to_quota_refuse_free_and_resume(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=[
            "--quota-backend-bytes", str(QUOTA), "--auto-compaction-retention", "0"]) as cluster:
        cluster.wait_for_leader()
        with Client(cluster.endpoints) as c:
            keep = {f"keep/{i}": f"v{i}" for i in range(5)}
            for k, v in keep.items():
                c.put(k, v)
            acked: dict[str, bytes] = {}
            deadline = time.monotonic() + 60
            with pytest.raises(NoSpaceError) as refused:
                for i in range(2_000):  # the quota is ~120 of these: bounded either way
                    assert time.monotonic() < deadline, "no NO_SPACE within 60 s"
                    value = os.urandom(VALUE_BYTES)
                    c.put(f"big/{i:05d}", value)
                    acked[f"big/{i:05d}"] = value
            assert "NOSPACE alarm is active" in str(refused.value)
            assert len(acked) * VALUE_BYTES >= QUOTA // 4, "refused long before the quota"

            # visible: coord status, etcd's Alarm and Status, etcd's error for a put
            out = subprocess.run([sys.executable, "-m", "coord", "status", "--endpoints",
                                  ",".join(cluster.endpoints)], capture_output=True, text=True,
                                 timeout=30)
            assert "ALARM NOSPACE" in out.stdout, out.stdout
            with grpc.insecure_channel(cluster.endpoints[2]) as ch:
                m = stubs.MaintenanceStub(ch)
                listed = m.Alarm(pb.AlarmRequest(action=pb.AlarmRequest.GET), timeout=10)
                assert {a.alarm for a in listed.alarms} == {pb.NOSPACE}
                assert any("alarm:NOSPACE" in e for e in m.Status(pb.StatusRequest(),
                                                                  timeout=10).errors)
                with pytest.raises(grpc.RpcError) as err:
                    stubs.KVStub(ch).Put(pb.PutRequest(key=b"x", value=b"y"), timeout=10)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert err.value.details() == "etcdserver: mvcc: database space exceeded"

            # reads and deletes work, and nothing acknowledged was lost, on every member
            for name, member in cluster.members.items():
                with Client([member.listen]) as one:
                    got = {kv.key.decode(): kv.value for kv in one.range(prefix="big/").kvs}
                    assert got == acked, f"{name} lost acknowledged writes"

            # a member restarted at the quota comes back, alarm and all
            cluster.restart("n2")
            cluster.wait_for_leader()
            assert alarms(cluster, "n2"), "the alarm did not survive a restart"

            # free space: delete, compact; the members lower the alarm themselves
            assert c.delete(prefix="big/").deleted == len(acked)
            c.compact(c.range(prefix="keep/").header.revision)  # and the history with it
            wait_for("the alarm lowered on every member",
                     lambda: all(not alarms(cluster, n) for n in cluster.members), 60, cluster)
            c.put("after", "the alarm")
            for name, member in cluster.members.items():
                with Client([member.listen]) as one:
                    kvs = one.range(prefix="keep/", serializable=True).kvs
                    assert {kv.key.decode(): kv.value.decode() for kv in kvs} == keep, name

            # the freed pages go back to the file system: coord defrag
            def db_sizes() -> list[int]:
                sizes = []
                for ep in cluster.endpoints:
                    with grpc.insecure_channel(ep) as ch:
                        sizes.append(stubs.MaintenanceStub(ch).Status(
                            pb.StatusRequest(), timeout=10).dbSize)
                return sizes

            before = db_sizes()
            out = subprocess.run([sys.executable, "-m", "coord", "defrag", "--endpoints",
                                  ",".join(cluster.endpoints)], capture_output=True, text=True,
                                 timeout=120)
            assert out.returncode == 0 and out.stdout.count(" -> ") == 3, out.stdout + out.stderr
            after = db_sizes()
            assert all(a < b / 2 for a, b in zip(after, before, strict=True)), (before, after)
            c.put("after", "defrag")
            assert c.get("after").value == b"defrag"
