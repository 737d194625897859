"""A real Prometheus (Debian's) scrapes a real 3-member cluster every second; a PromQL query
over its HTTP API sees the etcd API's Put counter move by the puts done, the alert rules
load and evaluate against the cluster's series, and every query of the Grafana dashboard
evaluates."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from pathlib import Path

import grpc
import pytest

from coord.etcdpb import rpc_pb2 as etcd_pb
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.testing.ports import free_port
from tests.etcdtools import require
from tests.server.metrics.rules import RULES, dashboard_queries
from tests.server.metrics.scrape import PROMETHEUS_HINT, get

pytestmark = pytest.mark.cluster

PUTS = "sum(grpc_server_handled_total{grpc_service=\"etcdserverpb.KV\",grpc_method=\"Put\"})"


def _query(api: str, promql: str) -> list[dict]:
    status, body = get(f"{api}/api/v1/query?query={urllib.parse.quote(promql)}")
    assert status == 200, body
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


NEVER = "0001-01-01"
"""The date Prometheus gives as a rule's last evaluation before its first."""


def _rules(api: str) -> list[dict]:
    status, body = get(api + "/api/v1/rules")
    assert status == 200, body
    return [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]


def _wait_for(what: str, check, timeout: float = 30.0):
    """`check()`'s first truthy answer, polled every 0.2 s; the test fails after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout}s (last answer {last!r})")


def _start_prometheus(root: Path, targets: list[str]) -> tuple[subprocess.Popen, str]:
    binary = require("prometheus", PROMETHEUS_HINT)
    config = root / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "coord",
                            "static_configs": [{"targets": targets}]}],
    }))
    port = free_port()
    log = open(root / "prometheus.log", "wb")  # noqa: SIM115 - the process's until it ends
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, f"http://127.0.0.1:{port}"


def test_prometheus_scrapes_the_cluster_and_sees_the_puts(metrics_cluster3, tmp_path):
    c = metrics_cluster3
    targets = [m.metrics_url.removeprefix("http://") for m in c.members.values()]
    proc, api = _start_prometheus(tmp_path, targets)
    try:
        _wait_for("prometheus ready", lambda: get(api + "/-/ready", timeout=1)[0] == 200)
        up = _wait_for("every member scraped", lambda: (
            r := _query(api, "up == 1")) and len(r) == len(targets) and r)
        assert sorted(s["metric"]["instance"] for s in up) == sorted(targets)
        before = _wait_for("a first Put count", lambda: _query(api, PUTS) or [
            {"value": [0, "absent"]}])[0]["value"][1]
        base = 0.0 if before == "absent" else float(before)
        puts = 12
        with grpc.insecure_channel(c.members[c.wait_for_leader()].listen) as channel:
            kv = etcd_grpc.KVStub(channel)
            for i in range(puts):
                kv.Put(etcd_pb.PutRequest(key=b"prom/k%d" % i, value=b"v"), timeout=5)
        _wait_for(f"the Put count at {base + puts:g}", lambda: (
            r := _query(api, PUTS)) and float(r[0]["value"][1]) == base + puts)
        leaders = _query(api, "sum(etcd_server_is_leader)")
        assert float(leaders[0]["value"][1]) == 1
        rules = _wait_for("the rules evaluated", lambda: (
            rs := _rules(api)) and all(not r["lastEvaluation"].startswith(NEVER)
                                       and r["health"] == "ok" for r in rs) and rs)
        assert len(rules) == 6
        assert all(r["state"] == "inactive" for r in rules), rules  # a healthy cluster
        for query in dashboard_queries():  # the Grafana dashboard's, each evaluated
            _query(api, query)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
