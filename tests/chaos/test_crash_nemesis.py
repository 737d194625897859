"""The crash nemesis on a real cluster: a member restarted armed at a crash point dies
there when it gets there, is started again unarmed at the fault's end (also when it
never got there), and nothing the cluster acknowledged meanwhile is lost."""

from __future__ import annotations

import pytest

from coord.chaos.nemesis import Planned, Schedule
from coord.testing import LocalCluster
from coord.testing.local_cluster import CRASH_POINTS
from tests.chaos.nemesis_rig import play
from tests.server.crash_rig import Writer, check_nothing_lost, member_log

# slow (make test-slow): the suite's short chaos run (tests/chaos/test_run.py) injects the
# crash nemesis among every kind, and tests/server/test_crash_points.py kills members at points
pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _pick(point: str, member: int) -> float:
    """The `pick` that arms member n<member> (of three running) at `point`."""
    points = sorted(CRASH_POINTS)
    at = (points.index(point) + 0.5) / len(points)
    assert int(at * 3) == member - 1, "no pick arms both: choose another member"
    return at


def test_a_crash_fault_dies_at_its_point_and_comes_back_unarmed(tmp_path):
    died, missed = _pick("log-after-fsync", 1), _pick("defrag", 1)  # defrag: never asked
    # the second is held long enough for its armed member to start and serve (a start
    # takes over a second on a busy two-core machine) before it is started unarmed
    schedule = Schedule([Planned(0.0, "crash", 6.0, died), Planned(7.0, "crash", 5.0, missed)])
    with LocalCluster(3, data_dir=tmp_path / "c") as c, Writer(c) as w:
        nemesis = play(c, w, schedule)
        first, second = nemesis.faults
        assert (first.member, first.note, first.error) == (
            "n1", "armed at log-after-fsync, died there", "")
        assert (second.member, second.note, second.error) == (
            "n1", "armed at defrag, not reached", "")
        assert all(m.running for m in c.members.values())
        log = member_log(c, "n1")
        assert log.count("failpoints armed") == 2
        after_last_arming = log.rpartition("failpoints armed")[2]
        assert after_last_arming.count("serving clients") == 2  # armed, then unarmed
        assert log.count("failpoint log-after-fsync: panic") == 1
        check_nothing_lost(c, w.acked, c.members)
