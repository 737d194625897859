"""Running etcd's own clients (etcdctl, the etcd3 package) against coord in tests.

They must be there: under CI (CI=true) a missing etcdctl fails the test loudly rather
than skipping it, because `make venv` installs it (Debian's etcd-client) on CI machines.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
import time

import pytest

ETCD_HINT = ("`make venv` installs Debian's etcd-client and etcd-server (as root), or run"
             " apt-get install etcd-client etcd-server")


def require(binary: str, hint: str = ETCD_HINT) -> str:
    """The path of `binary` (etcdctl, etcd, promtool...); a missing one skips the test, or
    fails it under CI, where `make venv` installs it (`hint` says how)."""
    path = shutil.which(binary)
    if path is None:
        message = f"{binary} is not installed: {hint}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def require_etcdctl() -> str:
    return require("etcdctl")


def etcdctl_env() -> dict[str, str]:
    return dict(os.environ, ETCDCTL_API="3")


def etcdctl(endpoints: list[str] | str, *args: str, input: str | None = None,
            timeout: float = 20.0, check: bool = True) -> subprocess.CompletedProcess:
    """Run one etcdctl command to completion."""
    eps = endpoints if isinstance(endpoints, str) else ",".join(endpoints)
    proc = subprocess.run(
        [require_etcdctl(), "--endpoints", eps, "--command-timeout=10s", *args],
        capture_output=True, text=True, input=input, timeout=timeout, env=etcdctl_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"etcdctl {' '.join(args)} failed ({proc.returncode}): "
                             f"{proc.stdout}{proc.stderr}")
    return proc


class LineProcess:
    """A long-running process whose output lines are read with a deadline, never by
    sleeping and hoping."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.args = command
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def read_until(self, predicate, timeout: float = 15.0) -> list[str]:
        """Lines up to and including the first that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{' '.join(self.args)}: no matching line within "
                                     f"{timeout}s; saw {self.seen[-20:]}")
            try:
                line = self.lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            self.seen.append(line)
            got.append(line)
            if predicate(line):
                return got

    def quiet_for(self, seconds: float) -> list[str]:
        """Whatever it printed within `seconds` (used to show something did NOT happen)."""
        deadline = time.monotonic() + seconds
        got = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(self.lines.get(timeout=min(left, 0.1)))
            except queue.Empty:
                pass
        self.seen += got
        return got

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)


class Background(LineProcess):
    """A long-running etcdctl (watch, lock, elect)."""

    def __init__(self, endpoints: list[str] | str, *args: str) -> None:
        eps = endpoints if isinstance(endpoints, str) else ",".join(endpoints)
        super().__init__([require_etcdctl(), "--endpoints", eps, *args], etcdctl_env())
