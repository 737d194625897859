"""Flame graphs of running members (`coord bench etcd --profile DIR`): py-spy (the
`bench` extra) records each member process over one measurement and writes one SVG
per member, named by the measurement, the member and its role. Sampling is
non-blocking (the members are not paused), at 100 Hz, so the figures printed beside it
move little."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

RATE_HZ = 100


def py_spy() -> str:
    """The py-spy executable, next to this interpreter or on PATH."""
    here = Path(sys.executable).with_name("py-spy")
    found = str(here) if here.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("--profile needs py-spy: pip install -e '.[bench]'")
    return found


class Profiler:
    """`with Profiler(...):` records every member while the block runs (at most
    `seconds`, rounded up: py-spy's own bound)."""

    def __init__(self, out: Path, pids: dict[str, int], leader: str, name: str,
                 seconds: float) -> None:
        self.out, self.pids, self.leader, self.name = out, pids, leader, name
        self.seconds = max(1, math.ceil(seconds))
        self.procs: dict[Path, subprocess.Popen] = {}

    def __enter__(self) -> Profiler:
        exe = py_spy()
        self.out.mkdir(parents=True, exist_ok=True)
        for member, pid in self.pids.items():
            role = "leader" if member == self.leader else "follower"
            svg = self.out / f"{self.name}-{member}-{role}.svg"
            self.procs[svg] = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--duration", str(self.seconds),
                 "--rate", str(RATE_HZ), "--nonblocking", "--output", str(svg)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        failed = []
        for svg, proc in self.procs.items():
            try:
                _, err = proc.communicate(timeout=self.seconds + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode != 0 or not svg.exists():
                failed.append(f"{svg.name}: {err.strip()[-300:]}")
        if failed and exc == (None, None, None):
            raise RuntimeError("py-spy failed: " + "; ".join(failed)
                               + (" (ptrace needs root or CAP_SYS_PTRACE)"
                                  if os.geteuid() != 0 else ""))
