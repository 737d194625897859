"""The benchmarks' memory curve reads a real process tree from /proc: a child that holds
64 MiB shows in the curve's peak, under the group for processes that are not JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from coord.bench.memory_curve import MemoryCurve, descendants, tree_rss

HOLD = 64 << 20
CHILD = (f"import time; b = bytearray({HOLD}); b[::4096] = b'x' * len(b[::4096]); "
         "print('held', flush=True); time.sleep(60)")


def test_the_curve_counts_a_childs_resident_memory():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"  # its pages are touched
        assert child.pid in descendants(os.getpid())
        now = tree_rss(os.getpid())
        assert now["py_workers"] >= HOLD  # not a JVM (a Spark test may have started one)
        with MemoryCurve(every_s=0.05) as curve:
            deadline = time.monotonic() + 5
            while len(curve.samples) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
        figures = curve.figures(points=2)
        assert figures["samples"] >= 3
        assert figures["peak_mib"]["py_workers"] >= HOLD >> 20
        assert figures["peak_mib"]["total"] >= figures["peak_mib"]["driver_py"] + 64
        assert len(figures["curve_s_mib"]) == 2
        assert figures["growth_mib"]["py_workers"] < HOLD >> 20  # it held them from the start
    finally:
        child.kill()
        child.wait(timeout=10)
    assert child.pid not in descendants(os.getpid())
