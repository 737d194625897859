"""A real 3-member cluster with --listen-metrics-urls: the counters move with the
operations done, promtool lints the exposition, the health checks answer as etcd's do, and
/health turns false on a member cut off into read-only mode and true again after the heal."""

from __future__ import annotations

import json
import os
import subprocess

import grpc
import pytest

from coord.client import Client, NoSpaceError
from coord.etcdpb import rpc_pb2 as etcd_pb
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.testing import LocalCluster
from tests.cut_off import mode_of, resume_paused, split_off, wait_until
from tests.etcdtools import require
from tests.server.metrics.scrape import PROMETHEUS_HINT, get, samples, value

pytestmark = pytest.mark.cluster


def test_counters_move_with_the_operations_done(metrics_cluster3):
    c = metrics_cluster3
    leader = c.wait_for_leader()
    url = c.members[leader].metrics_url
    before = samples(url)
    puts = 7
    with grpc.insecure_channel(c.members[leader].listen) as channel:
        kv = etcd_grpc.KVStub(channel)
        for i in range(puts):
            kv.Put(etcd_pb.PutRequest(key=b"metrics/k%d" % i, value=b"v"), timeout=5)
        with pytest.raises(grpc.RpcError) as future:  # a refusal, counted under its code
            kv.Range(etcd_pb.RangeRequest(key=b"metrics/k0", revision=1 << 40), timeout=5)
        assert future.value.code() == grpc.StatusCode.OUT_OF_RANGE
    with Client([c.members[leader].listen]) as client:
        with client.session(ttl=5.0) as session:
            session.own("metrics-group", ["p0", "p1"])
            after_own = samples(url)
        client.allocate_pid_block("metrics-test", size=10)
        client.init_producer("metrics-producer")
        client.init_producer("metrics-producer")  # a second instance fences the first
    after = samples(url)

    put = dict(grpc_type="unary", grpc_service="etcdserverpb.KV", grpc_method="Put")
    assert (value(after, "grpc_server_handled_total", **put, grpc_code="OK")
            - value(before, "grpc_server_handled_total", **put, grpc_code="OK")) == puts
    assert (value(after, "grpc_server_handling_seconds_count", **put)
            - value(before, "grpc_server_handling_seconds_count", **put)) == puts
    rng = dict(grpc_type="unary", grpc_service="etcdserverpb.KV", grpc_method="Range",
               grpc_code="OUT_OF_RANGE")
    assert value(after, "grpc_server_handled_total", **rng) - value(
        before, "grpc_server_handled_total", **rng) == 1
    applied = "etcd_server_proposals_applied_total"
    assert value(after, applied) - value(before, applied) >= puts + 5
    assert value(after, "etcd_server_proposals_committed_total") >= value(after, applied)
    assert value(after, "etcd_server_is_leader") == 1
    assert value(after, "etcd_server_has_leader") == 1
    assert value(after, "etcd_server_leader_changes_seen_total") >= 1
    fsyncs = "etcd_disk_wal_fsync_duration_seconds_count"
    assert value(after, fsyncs) - value(before, fsyncs) >= 1  # group commit: fewer than puts
    assert value(after, "etcd_mvcc_db_total_size_in_bytes") > 0
    assert value(after, "etcd_server_quota_backend_bytes") == 2 << 30
    # coord's own: the session and its claims, then the session's end releasing them
    assert value(after_own, "coord_sessions") - value(before, "coord_sessions") == 1
    assert value(after_own, "coord_owned_resources", group="metrics-group") == 2
    grants = dict(group="metrics-group", kind="grant")
    assert value(after, "coord_ownership_changes_total", **grants) == 2
    assert value(after, "coord_owned_resources", group="metrics-group") == 0
    assert value(after, "coord_sessions_ended_total", reason="released") >= 1
    issued = "coord_pids_issued_total"
    assert value(after, issued) - value(before, issued) == 10 + 1
    assert value(after, "coord_producer_fencings_total") - value(
        before, "coord_producer_fencings_total") == 1


def test_promtool_lints_the_exposition(metrics_cluster3):
    promtool = require("promtool", PROMETHEUS_HINT)
    for m in metrics_cluster3.members.values():
        status, body = get(m.metrics_url + "/metrics")
        assert status == 200
        lint = subprocess.run([promtool, "check", "metrics"], input=body,
                              capture_output=True, timeout=30)
        assert lint.returncode == 0, (m.name, lint.stdout, lint.stderr)


def test_health_livez_readyz_answer_as_etcds(metrics_cluster3):
    for m in metrics_cluster3.members.values():
        status, body = get(m.metrics_url + "/health")
        assert (status, json.loads(body)) == (200, {"health": "true", "reason": ""})
        assert get(m.metrics_url + "/livez") == (200, b"ok\n")
        status, body = get(m.metrics_url + "/readyz")
        assert status == 200 and body.endswith(b"\nok\n"), body
        assert get(m.metrics_url + "/nothing-here")[0] == 404


def test_health_is_false_on_a_read_only_member_and_true_after_the_heal(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "cluster", metrics=True) as c:
        survivor, others = split_off(c, "follower")
        url = c.members[survivor].metrics_url
        try:
            for n in others:
                c.pause(n)
            wait_until("survivor read-only", lambda: mode_of(c, survivor) == "read-only")
            status, body = get(url + "/health")
            assert (status, json.loads(body)) == (
                503, {"health": "false", "reason": "READ ONLY MODE"})
            status, body = get(url + "/readyz")
            assert status == 503 and b"[-]read_write failed: READ ONLY MODE" in body, body
            assert get(url + "/livez") == (200, b"ok\n")  # alive all the same
            cut_off = samples(url)
            assert value(cut_off, "coord_read_only") == 1
            assert value(cut_off, "coord_mode", mode="read-only") == 1
            assert value(cut_off, "coord_mode_changes_total", mode="read-only") == 1
            for n in others:
                c.resume(n)
            wait_until("/health true again", lambda: get(url + "/health")[0] == 200)
            healed = samples(url)
            assert value(healed, "coord_read_only") == 0
            assert value(healed, "coord_mode_changes_total", mode="read-write") == 1
        finally:
            resume_paused(c, others)


def test_promtool_catches_a_planted_lint_violation():
    """The lint above is live: a counter without `_total` is refused."""
    promtool = require("promtool", PROMETHEUS_HINT)
    planted = b"# HELP requests Requests.\n# TYPE requests counter\nrequests 1\n"
    lint = subprocess.run([promtool, "check", "metrics"], input=planted, capture_output=True,
                          timeout=30)
    assert lint.returncode != 0 and b"_total" in lint.stdout + lint.stderr


def test_round_trips_to_each_peer_are_timed(metrics_cluster3):
    c = metrics_cluster3
    ids = {name: f"{c.status(name).id:x}" for name in c.members}
    url = c.members["n1"].metrics_url
    rtt = "etcd_network_peer_round_trip_time_seconds_count"

    def timed_both() -> bool:
        found = samples(url)
        return all(value(found, rtt, To=ids[n]) >= 1 for n in ("n2", "n3"))

    wait_until("a round trip timed to n2 and n3", timed_both, timeout=20.0)
    assert value(samples(url), rtt, To=ids["n1"]) == 0  # not to itself


def test_a_followers_writes_are_forwarded_and_its_stream_messages_counted(metrics_cluster3):
    c = metrics_cluster3
    follower = next(n for n in c.members if n != c.wait_for_leader())
    url = c.members[follower].metrics_url
    before = samples(url)
    with Client([c.members[follower].listen]) as client:
        for i in range(4):
            client.put(b"forwarded/k%d" % i, b"v")
    after = samples(url)
    forwarded = "coord_forwarded_proposals_total"
    assert value(after, forwarded) - value(before, forwarded) >= 4
    ops = "coord_pipeline_message_ops_count"
    assert value(after, ops) - value(before, ops) >= 4


def test_snapshots_are_timed_and_counted(tmp_path):
    with LocalCluster(1, data_dir=tmp_path / "cluster", metrics=True, in_process=True,
                      extra_args=["--snapshot-every", "5"]) as c:
        c.wait_for_leader()
        url = c.members["n1"].metrics_url
        with Client(c.endpoints) as client:
            for i in range(40):
                client.put(b"snap/k%d" % i, b"v" * 100)
        wait_until("a snapshot taken", lambda: value(
            samples(url), "coord_snapshot_duration_seconds_count") >= 1, timeout=20.0)
        assert value(samples(url), "coord_snapshot_bytes_total") > 0


def test_nospace_shows_in_health_and_the_alarm_gauge(tmp_path):
    quota, value_bytes = 1_000_000, 8 * 1024
    with LocalCluster(1, data_dir=tmp_path / "cluster", metrics=True, in_process=True,
                      extra_args=["--quota-backend-bytes", str(quota),
                                  "--auto-compaction-retention", "0"]) as c:
        c.wait_for_leader()
        url = c.members["n1"].metrics_url
        assert value(samples(url), "coord_alarms", alarm="NOSPACE") == 0
        with Client(c.endpoints) as client, pytest.raises(NoSpaceError):
            for i in range(2_000):  # the quota is ~120 of these: bounded either way
                client.put(f"big/{i:05d}", os.urandom(value_bytes))
        assert value(samples(url), "coord_alarms", alarm="NOSPACE") == 1
        status, body = get(url + "/health")
        assert (status, json.loads(body)) == (503, {"health": "false",
                                                    "reason": "ALARM NOSPACE"})
