"""The metric names an alert rules file uses (coord's, etcd's and gRPC's, by prefix), and
the ones of those a member does not export."""

from __future__ import annotations

import re
from pathlib import Path

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "alerts.yml"
METRIC = re.compile(r"\b(?:etcd|coord|grpc)_[a-z0-9_]*[a-z0-9]\b")


def named_metrics(text: str) -> set[str]:
    return set(METRIC.findall(text))


def unexported(text: str, exported: set[str]) -> list[str]:
    """The metrics `text` names that are not among `exported` (sample names: a
    histogram's `_bucket`, `_sum` and `_count` each)."""
    return sorted(named_metrics(text) - exported)
