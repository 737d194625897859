"""coord's etcd API driven by the `etcd3` PyPI package (a client nobody here wrote)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]


def test_etcd3_package_against_a_cluster(etcd_cluster3):
    host, port = etcd_cluster3.endpoints[1].rsplit(":", 1)
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    script = Path(__file__).with_name("etcd3_script.py")
    proc = subprocess.run([sys.executable, str(script), host, port], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "etcd3 OK" in proc.stdout, proc.stdout + proc.stderr
