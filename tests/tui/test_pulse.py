"""The pulse view's numbers: parsing a /metrics answer, counter rates and the fsync p99
from bucket deltas (planted inputs), and a real cluster's proposals/s rising after puts
as the view's model sees it."""

from __future__ import annotations

import asyncio

import pytest

from coord.client import Client
from coord.tui.model import ClusterModel
from coord.tui.pulse import (
    MemberPulse,
    Pulses,
    Sample,
    increase,
    parse,
    quantile,
    rate,
    reachable_url,
    scrape,
)
from coord.tui.pulse_view import scrape_round

INF = float("inf")
EXPOSITION = """\
# HELP etcd_server_proposals_committed_total committed
# TYPE etcd_server_proposals_committed_total counter
etcd_server_proposals_committed_total 1200.0
# HELP etcd_server_leader_changes_seen_total changes
# TYPE etcd_server_leader_changes_seen_total counter
etcd_server_leader_changes_seen_total 2.0
# HELP etcd_server_id id
# TYPE etcd_server_id gauge
etcd_server_id{server_id="2a"} 1.0
# HELP coord_read_only ro
# TYPE coord_read_only gauge
coord_read_only 1.0
# HELP coord_alarms alarms
# TYPE coord_alarms gauge
coord_alarms{alarm="CORRUPT"} 3.0
coord_alarms{alarm="NOSPACE"} 1.0
# HELP etcd_disk_wal_fsync_duration_seconds fsync
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 5.0
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 4.0
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 6.0
etcd_disk_wal_fsync_duration_seconds_count 6.0
etcd_disk_wal_fsync_duration_seconds_sum 0.01
"""


def test_parse_reads_the_pulse_numbers():
    s = parse(EXPOSITION)
    assert (s.proposals, s.leader_changes, s.read_only, s.nospace, s.server_id) == (
        1200, 2, 1, 1, 0x2A)
    assert s.fsync == ((0.001, 4), (0.002, 5), (INF, 6))  # sorted by bound
    assert parse("") == Sample()


def test_a_counter_that_went_down_was_reset():
    assert increase(10, 15) == 5
    assert increase(10, 3) == 3
    assert rate(100, 160, 2.0) == 30
    assert rate(100, 160, 0) == 0


def test_p99_from_bucket_deltas():
    before = ((0.001, 100), (0.002, 100), (0.004, 100), (INF, 100))
    # 100 new observations: 50 under 1 ms, 40 in (1, 2], 10 in (2, 4]
    after = ((0.001, 150), (0.002, 190), (0.004, 200), (INF, 200))
    assert quantile(0.5, before, after) == pytest.approx(0.001)
    assert quantile(0.9, before, after) == pytest.approx(0.002)
    assert quantile(0.99, before, after) == pytest.approx(0.002 + 0.002 * 9 / 10)
    assert quantile(0.99, after, after) is None  # nothing observed between the scrapes
    beyond = ((0.001, 100), (0.002, 100), (0.004, 100), (INF, 101))
    assert quantile(0.99, before, beyond) == 0.004  # in +Inf: the highest finite bound


def test_a_member_pulse_grows_from_the_second_answer():
    p = MemberPulse("http://m")
    p.record(Sample(proposals=10, fsync=((0.001, 0), (INF, 0))), at=1.0)
    assert list(p.proposals) == []
    p.record(Sample(proposals=30, leader_changes=1, read_only=1,
                    fsync=((0.001, 5), (INF, 5))), at=3.0)
    assert list(p.proposals) == [10.0]
    assert list(p.fsync_p99_ms) == [pytest.approx(0.99)]
    assert (list(p.leader_changes), list(p.read_only), list(p.nospace)) == ([1], [1], [0])
    p.failed("")
    assert p.error == "no answer"
    p.record(Sample(proposals=30), at=5.0)
    assert p.error == "" and list(p.proposals) == [10.0, 0.0]


def test_a_member_that_does_not_answer_is_said_so():
    pulses = Pulses(["http://127.0.0.1:9"])  # the discard port: nothing listens
    answer = asyncio.run(scrape("http://127.0.0.1:9", timeout=2.0))
    assert isinstance(answer, str) and answer
    pulses.record("http://127.0.0.1:9", answer, 1.0, {})
    assert pulses.members["http://127.0.0.1:9"].error == answer


@pytest.mark.cluster
def test_proposals_per_second_rise_after_puts(metrics_cluster3):
    c = metrics_cluster3
    leader = c.wait_for_leader()
    model = ClusterModel()
    model.pulses = Pulses([m.metrics_url for m in c.members.values()])
    asyncio.run(scrape_round(model))
    asyncio.run(scrape_round(model))  # two answers: a first point, with no puts between
    pulse = model.pulses.members[c.members[leader].metrics_url]
    assert not pulse.error
    quiet = pulse.proposals[-1]
    with Client([c.members[leader].listen]) as client:
        for i in range(50):
            client.put(f"pulse/k{i}".encode(), b"v")
    asyncio.run(scrape_round(model))
    assert pulse.proposals[-1] > quiet
    assert all(not p.error for p in model.pulses.members.values())


def test_a_wildcard_metrics_url_is_read_at_the_members_host():
    assert reachable_url("http://0.0.0.0:7301", "10.1.2.3:2379") == "http://10.1.2.3:7301"
    assert reachable_url("http://127.0.0.1:7301", "h:2379") == "http://127.0.0.1:7301"


@pytest.mark.cluster
def test_the_console_finds_each_members_metrics_url(metrics_cluster3):
    """Each member's Status names its metrics URL as bound, and the console's member
    feed hands it to the pulse: no --metrics-urls needed."""
    from coord.client import AsyncClient
    from coord.client.admin_aio import AsyncAdmin
    from coord.tui.feeds import Feeds

    c = metrics_cluster3
    model = ClusterModel()

    async def read() -> dict[str, list[str]]:
        async with AsyncClient([m.listen for m in c.members.values()]) as client:
            feeds = Feeds(client, model)
            for m in c.members.values():
                await feeds._read_status(m.listen)
            admin = AsyncAdmin(client)
            return {name: list((await admin.status(m.listen)).metrics_urls)
                    for name, m in c.members.items()}

    assert asyncio.run(read()) == {name: [m.metrics_url] for name, m in c.members.items()}
    assert sorted(model.pulses.urls) == sorted(m.metrics_url for m in c.members.values())
