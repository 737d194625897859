"""Membership churn on a real cluster, as etcd's robustness suite does it: the `member`
nemesis replaces a follower (removed, killed, its data directory wiped, added back as
a learner, started, promoted at the fault's end), twice, under a writer; the replaced
members rebuild their whole state from the others and nothing acknowledged is lost."""

from __future__ import annotations

import pytest

from coord.chaos.nemesis import Planned, Schedule
from coord.testing import LocalCluster
from tests.chaos.nemesis_rig import play
from tests.server.crash_rig import Writer, check_nothing_lost, member_log

pytestmark = pytest.mark.cluster


# slow, left to `make test-slow`: the member nemesis runs in make test's short chaos run
@pytest.mark.slow
def test_members_replaced_under_writes_rebuild_everything_and_lose_nothing(tmp_path):
    # pick 0.1: the first follower; 0.9: the last one (the leader is never replaced)
    schedule = Schedule([Planned(0.0, "member", 3.0, 0.1), Planned(5.0, "member", 3.0, 0.9)])
    with LocalCluster(3, data_dir=tmp_path / "c") as c, Writer(c) as w:
        nemesis = play(c, w, schedule)
        faults = nemesis.faults
        assert [(f.kind, f.error) for f in faults] == [("member", ""), ("member", "")]
        replaced = {f.member for f in faults}
        assert len(replaced) == 2, faults  # two different followers
        assert not nemesis._learners  # both promoted back to voters
        assert all(m.running for m in c.members.values())
        for name in replaced:
            # wiped: it started again from an empty data directory, joining the cluster
            assert member_log(c, name).count("serving clients") == 2
        members = c.status(c.wait_for_leader()).members
        assert sorted((m.name, m.learner) for m in members) == [
            (n, False) for n in sorted(c.members)], members  # all voters again
        check_nothing_lost(c, w.acked, c.members)
