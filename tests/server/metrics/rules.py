"""What the deploy files name: the alert rules' and the Grafana dashboard's metric names
(coord's, etcd's and gRPC's, by prefix), the ones of those a member does not export, and
the dashboard's queries."""

from __future__ import annotations

import json
import re
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "coord.json"
METRIC = re.compile(r"\b(?:etcd|coord|grpc)_[a-z0-9_]*[a-z0-9]\b")


LABELS = re.compile(r"\b(?:by|without)\s*\([^)]*\)|\{[^}]*\}")
"""What names labels, not metrics: `by (...)`, `without (...)` and `{...}` matchers."""


def named_metrics(text: str) -> set[str]:
    return set(METRIC.findall(LABELS.sub(" ", text)))


def unexported(text: str, exported: set[str]) -> list[str]:
    """The metrics `text` names that are not among `exported` (sample names: a
    histogram's `_bucket`, `_sum` and `_count` each)."""
    return sorted(named_metrics(text) - exported)


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every PromQL query of the dashboard's panels."""
    panels = json.loads(path.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]
