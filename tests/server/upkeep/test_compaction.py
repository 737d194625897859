"""Auto-compaction's decision (server/upkeep/compaction.py) on a fake clock, its flags read
as etcd reads them, and the loop proposing on a real state machine."""

from __future__ import annotations

import asyncio

import pytest

from coord.serve_flags import member_config, parse_serve_args
from coord.server.upkeep.compaction import (
    PERIODIC,
    REVISION,
    AutoCompactor,
    CompactionPlanner,
    CompactionPolicy,
    parse_duration,
)
from coord.sm import commands as c
from coord.sm.machine import CoordMachine


def test_durations_read_as_go_reads_them():
    assert parse_duration("5m") == 300
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("500ms") == 0.5
    for bad in ("", "5", "m", "5 m", "5x", "-5m", "5m3"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_flags_mean_what_they_mean_to_etcd():
    assert CompactionPolicy.parse("periodic", "1") == CompactionPolicy(PERIODIC, 3600)
    assert CompactionPolicy.parse("periodic", "30s") == CompactionPolicy(PERIODIC, 30)
    assert CompactionPolicy.parse("revision", "1000") == CompactionPolicy(REVISION, 1000)
    assert not CompactionPolicy.parse("periodic", "0").enabled
    assert not CompactionPolicy.parse("revision", "0").enabled
    with pytest.raises(ValueError, match="revision mode is a count"):
        CompactionPolicy.parse("revision", "5m")
    with pytest.raises(ValueError, match="periodic mode is hours or a duration"):
        CompactionPolicy.parse("periodic", "soon")
    with pytest.raises(ValueError, match="--auto-compaction-mode"):
        CompactionPolicy.parse("daily", "1")
    # periodic: look every tenth of the retention, at most every 6 minutes (etcd's)
    assert CompactionPolicy(PERIODIC, 60).check_interval_s == 6
    assert CompactionPolicy(PERIODIC, 10 * 3600).check_interval_s == 360


def _serve(*extra: str) -> list[str]:
    return ["--name", "n1", "--data-dir", "/tmp/x", "--listen", "127.0.0.1:1",
            "--peer-listen", "127.0.0.1:2", "--initial-cluster", "n1=127.0.0.1:2", *extra]


def test_on_by_default_and_bad_flags_name_the_flag(monkeypatch):
    monkeypatch.setenv("COORD_CLUSTER_SECRET", "s" * 32)
    default = member_config(parse_serve_args(_serve())).compaction
    assert default == CompactionPolicy(PERIODIC, 300) and default.enabled
    revision = member_config(parse_serve_args(_serve(
        "--auto-compaction-mode", "revision", "--auto-compaction-retention", "50"))).compaction
    assert revision == CompactionPolicy(REVISION, 50)
    with pytest.raises(ValueError, match="--auto-compaction-retention"):
        member_config(parse_serve_args(_serve(
            "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1h")))


def test_periodic_compacts_to_the_revision_a_full_retention_ago():
    p = CompactionPlanner(CompactionPolicy(PERIODIC, 10), now=0)
    revs = {}
    for tick in range(0, 31):  # one check a second, 7 revisions a second
        now, rev = float(tick), 7 * tick + 3
        revs[now] = rev
        p.observe(now, rev)
        target = p.target(now, rev, compacted=0)
        if tick < 10:
            assert target is None, "nothing before a full retention has passed"
        elif tick in (10, 20, 30):
            assert target == revs[now - 10], "the revision sampled a retention ago"
            p.compacted(now)
        else:
            assert target is None, "at most one compaction per retention"


def test_periodic_never_compacts_what_is_already_compacted_or_within_retention():
    p = CompactionPlanner(CompactionPolicy(PERIODIC, 10), now=0)
    p.observe(0, 5)
    p.observe(12, 50)
    assert p.target(12, 50, compacted=5) is None  # a client compacted to 5 already
    assert p.target(12, 50, compacted=0) == 5
    p2 = CompactionPlanner(CompactionPolicy(PERIODIC, 10), now=0)
    p2.observe(3, 9)  # sampling began late (a stalled member): 9 is not yet 10 s old
    assert p2.target(12, 40, compacted=0) is None
    assert p2.target(13, 40, compacted=0) == 9


def test_revision_mode_keeps_between_one_and_one_point_one_retentions():
    p = CompactionPlanner(CompactionPolicy(REVISION, 100), now=0)
    assert p.target(0, 100, compacted=0) is None  # nothing older than the retention yet
    assert p.target(0, 109, compacted=0) is None  # not yet a tenth of it past
    assert p.target(0, 110, compacted=0) == 10
    assert p.target(0, 119, compacted=10) is None
    assert p.target(0, 120, compacted=10) == 20


def test_off_means_never():
    p = CompactionPlanner(CompactionPolicy(PERIODIC, 0), now=0)
    p.observe(0, 1)
    assert p.target(10**9, 10**9, compacted=0) is None


def test_only_a_caught_up_leader_proposes_and_the_machine_applies_it():
    asyncio.run(_leader_proposes())


async def _leader_proposes() -> None:
    m = CoordMachine()
    for i in range(30):
        m.execute(c.Put(b"k", str(i).encode()))  # revisions 2..31
    leading = False
    proposed: list[c.Compact] = []

    async def propose(cmd: c.Compact):
        proposed.append(cmd)
        return m.execute(cmd)

    compactor = AutoCompactor(CompactionPolicy(REVISION, 10), lambda: leading,
                              lambda: (m.revision, m.kv.compact_revision), propose)
    assert await compactor.step() is None and not proposed  # a follower only samples
    leading = True
    assert await compactor.step() == 21  # keeps the last 10 revisions
    assert m.kv.compact_revision == 21 and proposed == [c.Compact(21)]
    assert await compactor.step() is None  # nothing new: nothing proposed
    assert len(proposed) == 1
    assert m.execute(c.EventsSince(5, b"k")).error == "COMPACTED"
    assert m.execute(c.Range(b"k", revision=21)).kvs[0].value == b"19"
