"""etcd clients nobody here wrote, logged in as users, against coord and against real
etcd 3.4 side by side: the `etcd3` package's answers (permission refusals, an idle token
expiring) are the same from both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster
from tests.etcdtools import require
from tests.server.etcd.test_etcd_auth import set_up_auth

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]


def etcd3_transcript(endpoint: str) -> list[str]:
    host, port = endpoint.rsplit(":", 1)
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    script = Path(__file__).with_name("etcd3_auth_script.py")
    proc = subprocess.run([sys.executable, str(script), host, port, "2.5"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.slow
def test_the_etcd3_client_logs_in_and_meets_an_expired_token_as_with_etcd(tmp_path):
    require("etcd")
    with LocalCluster(1, data_dir=tmp_path / "c", extra_args=["--auth-token-ttl", "1"]) as c:
        set_up_auth(c.etcd_endpoints[0])
        coord = etcd3_transcript(c.etcd_endpoints[0])
    with EtcdCluster(1, extra_args=["--auth-token-ttl", "1"]) as e:
        set_up_auth(e.endpoints[0])
        etcd = etcd3_transcript(e.endpoints[0])
    assert coord == etcd
    assert coord == [
        "put p/x: ok None",
        "get p/x: ok b'1'",
        "get c: PERMISSION_DENIED etcdserver: permission denied",
        "put c: PERMISSION_DENIED etcdserver: permission denied",
        "get p/x after idling: UNAUTHENTICATED etcdserver: invalid auth token",
        "get p/x with a new client: ok b'1'",
        "wrong password: INVALID_ARGUMENT etcdserver: authentication failed, "
        "invalid user ID or password",
    ]
