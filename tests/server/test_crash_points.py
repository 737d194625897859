"""A member of a real 3-member cluster killed (kill -9 of itself) at each named crash
point (coord.server.failpoints) while a writer runs: restarted unarmed, it must come
back and hold every put the cluster acknowledged, and the cluster must have lost none.

The suite runs a few points; `make crash-points` runs every one (COORD_CRASH_SWEEP=1)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from coord.cli.defrag import defrag_one
from coord.server.failpoints import POINTS
from coord.testing import LocalCluster
from tests.server.crash_rig import (
    SNAPSHOT_ARGS,
    Writer,
    a_follower,
    check_nothing_lost,
    make_leader,
    member_log,
    wait_exited,
)

pytestmark = pytest.mark.cluster

SWEEP = os.environ.get("COORD_CRASH_SWEEP") == "1"
IN_SUITE = {"log-after-fsync", "snapshot-install"}
SNAPSHOTTING = {"snapshot-capture", "snapshot-compact", "snapshot-send", "snapshot-install",
                "membership-change"}
"""Points run on members that snapshot every few dozen puts (`SNAPSHOT_ARGS`); the others
on members that take none in a case, so the one restarted rebuilds its state from its
own log rather than being sent the leader's snapshot."""


def _on_traffic(c: LocalCluster, w: Writer, spec: str) -> str:
    """Points every member passes as writes go on: a follower restarted armed."""
    target = a_follower(c)
    c.restart(target, failpoints=spec, wait=False)
    return target


def _on_snapshot_install(c: LocalCluster, w: Writer, spec: str) -> str:
    """A follower that slept through a compaction gets the leader's snapshot."""
    target = a_follower(c)
    c.kill(target)
    w.wait_for(100)  # the others snapshot every few dozen: past where it stopped
    c.start_member(target, wait=False, failpoints=spec)
    return target


def _on_snapshot_send(c: LocalCluster, w: Writer, spec: str) -> str:
    """The armed member made leader, and a follower that slept through a compaction."""
    target = a_follower(c)
    c.restart(target, failpoints=spec)
    make_leader(c, target)
    lagging = next(n for n in c.members if n != target and c.members[n].running)
    c.kill(lagging)
    w.wait_for(100)
    c.start_member(lagging, wait=False)
    return target


def _on_membership_change(c: LocalCluster, w: Writer, spec: str) -> str:
    target = a_follower(c)
    c.restart(target, failpoints=spec)
    c.add_member("n4")
    return target


def _on_defrag(c: LocalCluster, w: Writer, spec: str) -> str:
    target = a_follower(c)
    c.restart(target, failpoints=spec)
    answer = defrag_one(c.members[target].listen, timeout=10)
    assert "FAILED" in answer, answer  # it died answering
    return target


PROVOKE: dict[str, Callable[[LocalCluster, Writer, str], str]] = {
    "log-before-fsync": _on_traffic,
    "log-after-fsync": _on_traffic,
    "apply-before-answer": _on_traffic,
    "snapshot-capture": _on_traffic,
    "snapshot-compact": _on_traffic,
    "snapshot-send": _on_snapshot_send,
    "snapshot-install": _on_snapshot_install,
    "membership-change": _on_membership_change,
    "defrag": _on_defrag,
}
"""How each point is brought about; returns the member armed with it."""


def test_every_crash_point_has_a_case():
    assert set(PROVOKE) == set(POINTS)


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_member_killed_at_a_crash_point_comes_back_with_nothing_lost(tmp_path, point):
    if not (SWEEP or point in IN_SUITE):
        pytest.skip("in `make crash-points` (COORD_CRASH_SWEEP=1)")
    args = SNAPSHOT_ARGS if point in SNAPSHOTTING else []
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=args) as c, Writer(c) as w:
        w.wait_for(150)  # snapshotting, every member has: no bootstrap entries replayed
        target = PROVOKE[point](c, w, f"{point}=panic")
        assert wait_exited(c, target) == -signal.SIGKILL, member_log(c, target)[-2000:]
        assert f"failpoint {point}: panic" in member_log(c, target)
        c.start_member(target)  # unarmed
        w.wait_for(30)
        w.stop()
        check_nothing_lost(c, w.acked, c.members)
        with pytest.raises(AssertionError, match="acknowledged puts lost"):  # the check is live
            check_nothing_lost(c, {**w.acked, b"crash/never-written": b"x"}, [])
