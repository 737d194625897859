"""One nemesis schedule played on a real cluster under a crash_rig Writer: the shared
frame of the tests that run one nemesis kind for a few seconds."""

from __future__ import annotations

import time

from coord.chaos.nemesis import Nemesis, Schedule
from coord.testing import LocalCluster
from tests.server.crash_rig import Writer


def play(cluster: LocalCluster, writer: Writer, schedule: Schedule,
         before: int = 50, after: int = 30) -> Nemesis:
    """`before` acknowledged puts, the schedule played to its end (bounded: 120 s),
    `after` more puts, the writer stopped; returns the nemesis for its faults."""
    writer.wait_for(before)
    nemesis = Nemesis(cluster, schedule, t0=time.monotonic())
    nemesis.start()
    nemesis._thread.join(timeout=120)
    nemesis.stop()
    writer.wait_for(after)
    writer.stop()
    return nemesis
