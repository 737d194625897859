"""Resident memory of a process tree over a run, sampled from /proc on a thread: this
process (the Python driver), the JVMs it started (Spark's driver JVM and, on a
`local-cluster` master, its worker and executor JVMs) and the Python workers those
run. A benchmark that claims "memory stays flat" prints the curve, not one reading.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from coord.bench.footprint import mib, rss_bytes

GROUPS = ("driver_py", "jvm", "py_workers")


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process /proc shows."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        out[int(entry)] = (ppid, name)
    return out


def descendants(root: int) -> dict[int, str]:
    """The processes under `root` (not itself), by pid, with their command names."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _name) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in found or pid not in procs:
            continue
        found[pid] = procs[pid][1]
        todo.extend(children.get(pid, ()))
    return found


def tree_rss(root: int) -> dict[str, int]:
    """Bytes resident now: `root` itself, the JVMs under it, everything else under it
    (Spark's Python workers), and how many JVMs there are."""
    rss = {g: 0 for g in GROUPS}
    rss["driver_py"] = rss_bytes(root)
    jvms = 0
    for pid, name in descendants(root).items():
        is_jvm = name == "java"
        jvms += is_jvm
        rss["jvm" if is_jvm else "py_workers"] += rss_bytes(pid)
    return {**rss, "total": sum(rss.values()), "jvms": jvms}


@dataclass
class MemoryCurve:
    """Samples `tree_rss(os.getpid())` every `every_s` seconds between `start` and
    `stop` (or as a context manager); `figures()` is the peak of each group and a few
    samples spread over the run. (The machine's load is the run record's:
    `coord.bench.run_record`.)"""

    every_s: float = 1.0
    root: int = field(default_factory=os.getpid)
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> MemoryCurve:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="memory-curve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10 + self.every_s)
        self._sample()  # the end state, so a short run still has a reading

    def __enter__(self) -> MemoryCurve:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _sample(self) -> None:
        self.samples.append((time.monotonic() - self._t0, tree_rss(self.root)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every_s)

    def figures(self, points: int = 8) -> dict[str, Any]:
        """Peak MiB per group (and of the total at any one time), each group's growth
        from the first sample to its peak (what this phase added: the driver keeps what
        an earlier phase in the same process used), the most JVMs seen, and `points`
        samples (seconds, total MiB) spread evenly over the run."""
        if not self.samples:
            return {}
        peak = {g: float(mib(max(s[g] for _, s in self.samples))) for g in (*GROUPS, "total")}
        step = max(1, len(self.samples) // points)
        picked = self.samples[::step][:points - 1] + [self.samples[-1]]
        first = self.samples[0][1]
        growth = {g: round(peak[g] - float(mib(first[g])), 1) for g in peak}
        return {"peak_mib": peak, "growth_mib": growth,
                "jvms": max(s["jvms"] for _, s in self.samples), "samples": len(self.samples),
                "curve_s_mib": [[round(t), float(mib(s["total"]))] for t, s in picked]}
