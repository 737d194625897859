"""The installed `coord tui` in a real terminal: tmux runs it against a live member,
keys go in with send-keys and the screen comes back with capture-pane; `:q` ends it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from coord.client import Client
from coord.testing import cluster

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

COORD = Path(sys.executable).with_name("coord")


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)


def screen_until(name: str, *needles: str, limit_s: float = 20.0) -> str:
    deadline = time.monotonic() + limit_s
    text = ""
    while time.monotonic() < deadline:
        text = tmux("capture-pane", "-p", "-t", name).stdout
        if all(n in text for n in needles):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{needles} not on screen within {limit_s}s:\n{text}")


def command(name: str, line: str) -> None:
    tmux("send-keys", "-t", name, "-l", ":")  # -l: tmux reads a bare ":" as its own
    screen_until(name, "or :q")  # the command prompt's placeholder: it is open
    tmux("send-keys", "-t", name, "-l", line)
    tmux("send-keys", "-t", name, "Enter")


def test_installed_console_in_tmux():
    assert COORD.exists(), f"{COORD} is not installed (make venv)"
    with cluster(members=1, in_process=True) as c, Client(c.endpoints) as client:
        s = client.open_session("smoke", ttl=30)
        client.own(s.session_id, "jobs", ["ingest-7"])
        client.put("cfg/smoke", "hello")
        name = f"coord-tui-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "TERM": "xterm-256color"}
        started = subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "30",
             f"{COORD} tui --endpoints {c.endpoints[0]}; sleep 30"],
            env=env, capture_output=True, text=True, timeout=10)
        assert started.returncode == 0, started.stderr
        try:
            screen_until(name, "Members [1/1]", "leader", "read-write")
            command(name, "owners")
            screen_until(name, "Owners [1/1]", "ingest-7")
            command(name, "keys")
            screen_until(name, "Keys [1/1]", "cfg/")
            command(name, "q")
            deadline = time.monotonic() + 10
            while "Keys [" in tmux("capture-pane", "-p", "-t", name).stdout:
                assert time.monotonic() < deadline, "coord tui did not quit on :q"
                time.sleep(0.2)
        finally:
            tmux("kill-session", "-t", name)
