"""`stop_processes`: SIGTERM first, SIGKILL for what ignores it, paused ones included."""

from __future__ import annotations

import signal
import subprocess
import sys

from coord.testing.processes import stop_processes

LOOP = "import time\nprint('ready', flush=True)\nfor _ in range(600): time.sleep(0.1)\n"
DEAF = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + LOOP


class Child(subprocess.Popen):
    """A child that records the timeout of each wait() on it: the grace it was given."""

    waits: list[float | None]

    def wait(self, timeout: float | None = None) -> int:
        self.waits.append(timeout)
        return super().wait(timeout)


def _child(code: str) -> Child:
    p = Child([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    p.waits = []
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_running_paused_and_exited_processes_stop_on_sigterm():
    running, paused, exited = _child(LOOP), _child(LOOP), _child(LOOP)
    paused.send_signal(signal.SIGSTOP)
    exited.kill()
    exited.wait()
    stop_processes([running, paused, exited], grace=20.0)
    # SIGTERM, not the SIGKILL that ends the grace: nobody waited it out.
    assert running.returncode == paused.returncode == -signal.SIGTERM


def test_one_that_ignores_sigterm_is_killed_after_the_grace_once():
    """Two deaf processes cost one grace period, not two: the first is waited on for the
    grace, the second for what is left of the same deadline (nothing)."""
    deaf = [_child(DEAF), _child(DEAF)]
    stop_processes(deaf, grace=2.0)
    assert [p.returncode for p in deaf] == [-signal.SIGKILL] * 2
    first, second = (p.waits[0] for p in deaf)
    assert first is not None and 0 < first <= 2.0
    assert second == 0.0, f"the second was given {second} s of its own"
