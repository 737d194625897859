"""deploy/prometheus/alerts.yml: promtool accepts it, and every metric it names is exported
by a running member (a rule on a metric nobody exports never fires)."""

from __future__ import annotations

import subprocess

import pytest

from coord.testing import LocalCluster
from tests.etcdtools import require
from tests.server.metrics.rules import RULES, named_metrics, unexported
from tests.server.metrics.scrape import PROMETHEUS_HINT, names, samples


def test_promtool_accepts_the_alert_rules():
    promtool = require("promtool", PROMETHEUS_HINT)
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 6 rules found" in check.stdout


def test_promtool_refuses_a_planted_broken_rule(tmp_path):
    promtool = require("promtool", PROMETHEUS_HINT)
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace("etcd_server_has_leader == 0",
                                                "etcd_server_has_leader == ("))
    check = subprocess.run([promtool, "check", "rules", str(broken)], capture_output=True,
                           text=True, timeout=30)
    assert check.returncode != 0


@pytest.mark.cluster
def test_every_metric_the_rules_name_is_exported_by_a_running_member(tmp_path):
    text = RULES.read_text()
    assert {"etcd_server_has_leader", "coord_read_only", "coord_alarms",
            "etcd_disk_wal_fsync_duration_seconds_bucket",
            "etcd_server_leader_changes_seen_total"} <= named_metrics(text)
    with LocalCluster(1, data_dir=tmp_path / "cluster", metrics=True) as c:
        c.wait_for_leader()
        exported = names(samples(c.members["n1"].metrics_url))
    assert unexported(text, exported) == []
    # the check itself: a rule on a metric nobody exports is caught
    assert unexported(text + "\n        expr: coord_not_a_metric > 0\n", exported) == [
        "coord_not_a_metric"]
