"""deploy/grafana/coord.json: every panel queries something, promtool parses every query,
and every metric the dashboard names is exported by a running 3-member cluster's members."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from coord.client import Client
from tests.etcdtools import require
from tests.server.metrics.rules import DASHBOARD, dashboard_queries, named_metrics, unexported
from tests.server.metrics.scrape import PROMETHEUS_HINT, names, samples


def test_every_panel_has_a_query():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    graphs = [p for p in panels if p["type"] != "row"]
    assert graphs and all(p.get("targets") and all(t["expr"] for t in p["targets"])
                          for p in graphs)


def test_promtool_parses_every_query(tmp_path):
    """Each query made a recording rule, which `promtool check rules` parses; a planted
    broken query is refused."""
    promtool = require("promtool", PROMETHEUS_HINT)

    def check(queries: list[str]) -> subprocess.CompletedProcess:
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]}]}
        path = tmp_path / "queries.yml"
        path.write_text(json.dumps(rules))  # JSON is YAML
        return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                              text=True, timeout=30)

    queries = dashboard_queries()
    good = check(queries)
    assert good.returncode == 0, good.stdout + good.stderr
    assert f"SUCCESS: {len(queries)} rules found" in good.stdout
    assert check([*queries, "rate(etcd_server_has_leader[1m]"]).returncode != 0


@pytest.mark.cluster
def test_every_metric_the_dashboard_names_is_exported(metrics_cluster3):
    text = DASHBOARD.read_text()
    assert len(named_metrics(text)) >= 25
    assert not named_metrics('sum by (grpc_code) (x{grpc_method="Put"})')  # labels
    c = metrics_cluster3
    urls = [m.metrics_url for m in c.members.values()]
    # a group, a claim and an ended session: their labelled series exist from then on
    with Client([c.members[c.wait_for_leader()].listen]) as client:
        with client.session(ttl=5.0) as session:
            session.own("dashboard", ["p0"])

    def missing() -> list[str]:  # the peer round trips come with the first probe (5 s)
        return unexported(text, set().union(*(names(samples(u)) for u in urls)))

    deadline = time.monotonic() + 30.0
    while (left := missing()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], "not exported within 30 s"
