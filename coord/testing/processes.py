"""Stopping the child processes a test rig or a benchmark started."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterable

__all__ = ["stop_processes"]


def stop_processes(procs: Iterable[subprocess.Popen], grace: float = 10.0) -> None:
    """Ask every process still running to stop (SIGTERM, after a SIGCONT: a paused one
    cannot act on it), wait for them all against one deadline `grace` seconds away, and
    kill -9 those still there. Returns once every one has exited and been reaped.

    All at once, not one after another: members shutting down in parallel are not each
    kept waiting on the others, and one that hangs costs `grace` once, not per process."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                p.send_signal(signal.SIGCONT)
                p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
