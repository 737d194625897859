"""Failpoints armed by name (coord.server.failpoints): the syntax, what each action does,
and that nothing fires unarmed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coord.server import failpoints
from coord.server.failpoints import ENV_VAR, FailpointError
from coord.testing.ports import free_ports


@pytest.fixture(autouse=True)
def _disarmed():
    yield
    failpoints.arm("")


def test_unarmed_points_do_nothing():
    failpoints.arm("")
    for point in failpoints.POINTS:
        failpoints.hit(point)


def test_error_fires_from_the_nth_hit_on_and_only_at_its_point(capfd):
    assert failpoints.arm("log-after-fsync=error@3; defrag=sleep(1)") == [
        "log-after-fsync", "defrag"]
    failpoints.hit("log-before-fsync")
    failpoints.hit("log-after-fsync")
    failpoints.hit("log-after-fsync")
    with pytest.raises(FailpointError, match="failpoint log-after-fsync"):
        failpoints.hit("log-after-fsync")
    with pytest.raises(FailpointError):
        failpoints.hit("log-after-fsync")
    failpoints.hit("defrag")  # a sleep: returns
    assert "failpoint log-after-fsync: error" in capfd.readouterr().err


@pytest.mark.parametrize("spec, says", [
    ("log-after-fsnc=panic", "no failpoint 'log-after-fsnc'"),
    ("defrag=explode", "expected defrag=panic, error or sleep"),
    ("defrag", "expected defrag=panic"),
    ("defrag=sleep(x)", "expected defrag=panic"),
    ("defrag=panic@0", "expected defrag=panic"),
])
def test_a_bad_spec_is_refused_naming_it(spec, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        failpoints.arm(spec)


def test_panic_kills_the_process_itself_after_naming_the_point():
    code = ("from coord.server import failpoints\n"
            "failpoints.arm_from_environment()\n"
            "failpoints.hit('snapshot-send')\n"
            "print('went on')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={ENV_VAR: "snapshot-send=panic"}, timeout=60)
    assert run.returncode == -9
    assert "failpoint snapshot-send: panic" in run.stderr
    assert "went on" not in run.stdout


def test_serve_refuses_an_unknown_failpoint(tmp_path):
    client, peer = free_ports(2)
    run = subprocess.run(
        [sys.executable, "-m", "coord", "serve", "--name", "n1", "--data-dir",
         str(tmp_path / "n1"), "--listen", f"127.0.0.1:{client}", "--peer-listen",
         f"127.0.0.1:{peer}", "--initial-cluster", f"n1=127.0.0.1:{peer}"],
        capture_output=True, text=True, env={ENV_VAR: "log-fsync=panic",
                                             "COORD_CLUSTER_SECRET": "x" * 64}, timeout=60)
    assert run.returncode == 1
    assert not (tmp_path / "n1").exists()  # refused before it touched anything
    assert "no failpoint 'log-fsync'" in run.stderr
