"""LocalCluster's own rules, apart from any cluster it starts."""

from __future__ import annotations

import pytest

from coord.testing import LocalCluster


def test_a_member_command_runs_processes_only():
    with pytest.raises(ValueError, match="in_process"):
        LocalCluster(1, in_process=True, member_command=lambda name: ["true"])
