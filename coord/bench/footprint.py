"""What a member process costs the machine, read from outside it: resident memory from
/proc and disk as the bytes of the files under its data dir. The same reading for coord
and etcd members, so the two are compared one way. For coord's also the snapshots a
member's log says it took (their cost lands in whatever was being measured)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path


def rss_bytes(pid: int) -> int:
    """Resident set size of process `pid` (0 if it is gone)."""
    return _status_bytes(pid, "VmRSS:")


def high_water_bytes(pid: int) -> int:
    """Process `pid`'s peak resident set size over its life, as the kernel kept it
    (0 if it is gone): a peak no sampling can miss."""
    return _status_bytes(pid, "VmHWM:")


def _status_bytes(pid: int, field: str) -> int:
    """A size in /proc/`pid`/status (kB there), in bytes; 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def dir_bytes(path: Path) -> int:
    """Bytes of the regular files under `path` (apparent sizes; files that vanish while
    counting, as SQLite's journals do, are skipped)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f}"


def per_member(values: dict[str, float]) -> str:
    """MiB of each member, in one table column."""
    return " ".join(f"{mib(v):>7}" for v in values.values())


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process `pid` has used, all its threads (0.0 if it is
    gone): two readings a window apart give its CPU % over the window, read from outside
    so coord and its driver are measured the same way."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> tuple[int, int, int]:
    """Process `pid`'s context switches so far, from /proc: voluntary and involuntary
    summed over its threads, and the voluntary ones of its main thread alone (a server's
    event loop: each one a time it slept and had to be woken, for I/O, the GIL or the
    disk). Threads that ended are not counted; (0, 0, 0) if the process is gone."""
    voluntary = involuntary = main = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return 0, 0, 0
    for tid in tids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v = int(line.split()[1])
                        voluntary += v
                        if tid == str(pid):
                            main = v
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        involuntary += int(line.split()[1])
    return voluntary, involuntary, main


SNAPSHOT_LINE = re.compile(r"took a snapshot of (\d+) bytes at index (\d+) in ([\d.]+)s")
"""The line a coord member logs for each snapshot it takes (server/node/snapshots.py)."""


def logged_snapshots(log: Path) -> list[tuple[int, int, float]]:
    """(bytes, index, seconds) of every snapshot a coord member's `log` says it took,
    oldest first (none if the log is not there yet)."""
    if not log.exists():
        return []
    return [(int(size), int(index), float(seconds))
            for size, index, seconds in SNAPSHOT_LINE.findall(log.read_text(errors="replace"))]
