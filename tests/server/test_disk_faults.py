"""Disk faults under one member of a real 3-member cluster, a writer recording every
acknowledged put: a failed fsync (the member must stop, not go on: PostgreSQL's fsync
lesson), a torn tail of its SQLite files found at restart (recover what SQLite
recovers, or refuse to start naming the file), and a slow disk under the leader.
(`make crash-points` runs the cases the suite skips.)"""

from __future__ import annotations

import os
import re

import pytest

from coord.testing import ClusterError, LocalCluster
from tests.server import crash_rig as rig

pytestmark = pytest.mark.cluster

SWEEP = os.environ.get("COORD_CRASH_SWEEP") == "1"


def test_a_member_whose_fsync_fails_stops_and_comes_back_when_restarted(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c") as c, rig.Writer(c) as w:
        w.wait_for(50)
        target = rig.a_follower(c)
        c.restart(target, failpoints="log-before-fsync=error", wait=False)
        assert rig.wait_exited(c, target) == 1  # stopped: not killed, not going on
        log = rig.member_log(c, target)
        assert "failpoint log-before-fsync: error" in log
        assert re.search(r"stopped serving, it cannot go on safely \(.*raft\.db.*"
                         r"save failed: .*injected I/O failure", log), log[-2000:]
        c.start_member(target)  # unarmed
        w.wait_for(30)
        w.stop()
        rig.check_nothing_lost(c, w.acked, c.members)


@pytest.mark.parametrize("suffix, keep", [("-wal", -1000), ("", -1000), ("", 0.5)])
def test_a_torn_tail_found_at_restart_is_recovered_or_refused_by_name(tmp_path, suffix, keep):
    """kill -9, then the tail of the member's WAL or database file gone (its last 1,000
    bytes, as a torn last write leaves them; or half the file): it comes back holding
    every acknowledged put, or refuses to start saying which file is damaged; never
    serves as if whole."""
    if suffix == "" and not SWEEP:
        pytest.skip("in `make crash-points` (COORD_CRASH_SWEEP=1)")
    with LocalCluster(3, data_dir=tmp_path / "c") as c, rig.Writer(c) as w:
        w.wait_for(100)
        target = rig.a_follower(c)
        c.kill(target)
        store = c.members[target].data_dir / "raft.db"
        torn = store.with_name(store.name + suffix)
        size = torn.stat().st_size
        assert size > 1000, f"{torn} holds only {size} bytes"
        os.truncate(torn, size + keep if keep < 0 else int(size * keep))
        try:
            c.start_member(target)
        except ClusterError:
            log = rig.member_log(c, target).rpartition("serving clients")[2]
            assert str(store) in log and "cannot start" in log, log[-2000:]
            w.stop()
            rig.check_nothing_lost(c, w.acked, [n for n in c.members if n != target])
            return
        w.wait_for(30)
        w.stop()
        rig.check_nothing_lost(c, w.acked, c.members)


def test_a_slow_disk_under_the_leader_loses_nothing(tmp_path):
    """Every fsync'd write of the leader takes 50 ms longer: the cluster goes on, slower,
    and holds every acknowledged put."""
    with LocalCluster(3, data_dir=tmp_path / "c") as c, rig.Writer(c) as w:
        w.wait_for(30)
        target = rig.a_follower(c)
        c.restart(target, failpoints="log-before-fsync=sleep(50)")
        rig.make_leader(c, target)
        w.wait_for(40)
        assert c.wait_for_leader() == target
        assert "failpoints armed (COORD_FAILPOINTS): log-before-fsync" in rig.member_log(c, target)
        w.stop()
        rig.check_nothing_lost(c, w.acked, c.members)
