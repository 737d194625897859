"""`stop_processes`: SIGTERM first, SIGKILL for what ignores it, paused ones included."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from coord.testing.processes import stop_processes

LOOP = "import time\nprint('ready', flush=True)\nfor _ in range(600): time.sleep(0.1)\n"
DEAF = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + LOOP


def _child(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_running_paused_and_exited_processes_stop_on_sigterm():
    running, paused, exited = _child(LOOP), _child(LOOP), _child(LOOP)
    paused.send_signal(signal.SIGSTOP)
    exited.kill()
    exited.wait()
    started = time.monotonic()
    stop_processes([running, paused, exited], grace=20.0)
    assert running.returncode == paused.returncode == -signal.SIGTERM
    assert time.monotonic() - started < 10.0  # nobody waited out the grace


def test_one_that_ignores_sigterm_is_killed_after_the_grace_once():
    """Two deaf processes cost one grace period, not two."""
    deaf = [_child(DEAF), _child(DEAF)]
    started = time.monotonic()
    stop_processes(deaf, grace=2.0)
    elapsed = time.monotonic() - started
    assert [p.returncode for p in deaf] == [-signal.SIGKILL] * 2
    assert 2.0 <= elapsed < 3.5  # one after the other would take 4 s
