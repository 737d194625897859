"""What the fenced writer asks of coord, counted (`coord.testing.call_counts`): per job
(the driver's run start and its commit) and per partition (a task attempt's claim).
Counts of requests and of round trips waited for in a row do not depend on the machine,
so these hold the protocol to them: a change that adds a round trip fails here and
must say why it needs one. The writes run in this process, as in test_run_fence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coord.client import Client, SessionGoneError
from coord.client.recipes.fence import RunFencedError
from coord.spark import datasource
from coord.spark.attempt import claim, client_for, group_of, resource_of, start_run
from coord.spark.datasource import begin_run, prepare_sink, write_partition
from coord.spark.jobs import committed_version, version_record
from coord.spark.options import WriteOptions, parse_options
from coord.spark.sinks import open_sink
from coord.testing import LocalCluster, cluster
from coord.testing.call_counts import counting
from tests.spark.test_sinks import SCHEMA, batch

PARTITIONS = 4


@pytest.fixture(scope="module")
def coord1() -> Iterator[LocalCluster]:
    with cluster(members=1, in_process=True) as c:
        yield c


def _prepared(tmp_path: Path, coord1: LocalCluster, job: str) -> WriteOptions:
    """Options writing version 1 of `job` into a prepared SQLite sink."""
    opts = parse_options(
        {
            "sink": "sqlite",
            "path": str(tmp_path / "out.db"),
            "table": "out",
            "endpoints": ",".join(coord1.endpoints),
            "job": job,
            "version": "1",
        }
    )
    prepare_sink(opts, SCHEMA)
    return opts


def test_the_fenced_writer_s_calls_per_partition_and_per_job(tmp_path, coord1, capsys):
    job = "counted"
    opts = _prepared(tmp_path, coord1, job)
    client = client_for(opts.endpoints, opts.tls)
    client.get("warm-up")  # the connection, not the protocol
    sink = open_sink(opts.sink)
    try:
        with counting(client) as start:  # as the driver's writer() does
            seen = version_record(client, job)
            run = begin_run(client, job, sink)
    finally:
        sink.close()
    results, parts = [], []
    for p in range(PARTITIONS):
        with counting(client) as part:
            results.append(write_partition(opts, p, iter([batch(p * 10, p * 10 + 10)]), run, 1))
        parts.append(part)
    with counting(client) as commit:
        assert datasource.publish(opts, job, run, 1, results, seen) is None
    with capsys.disabled():
        print(
            f"\nrun start {start.as_dict()}\npartition {parts[0].as_dict()}\n"
            f"commit of {PARTITIONS} {commit.as_dict()}"
        )
    assert all(p.as_dict() == parts[0].as_dict() for p in parts)
    # the run start: the version read, then a session opened without keepalives, the
    # run slot owned (free: no owner read first) and the session closed
    assert start.as_dict()["by_method"] == {
        "Range": 1,
        "OpenSession": 1,
        "Own": 1,
        "CloseSession": 1,
    }
    assert (start.waits, start.beside, start.kept_alive) == (4, 0, 0)
    # a task: the run check beside the session's opening, the partition owned (free),
    # the producer initialized, the owner read back, and the session detached (a wait
    # that sends nothing)
    part = parts[0]
    assert part.as_dict()["by_method"] == {
        "GetOwner": 2,
        "OpenSession": 1,
        "Own": 1,
        "InitProducer": 1,
    }
    assert (part.waits, part.beside, part.kept_alive) == (5, 1, 1)
    # the commit: the run check inside the sink's publish, then the version recorded in
    # one compare-and-set beside the winners' sessions all ended together
    assert commit.as_dict()["by_method"] == {
        "GetOwner": 1,
        "CompareAndSet": 1,
        "CloseSession": PARTITIONS,
    }
    assert (commit.waits, commit.beside, commit.kept_alive) == (2, 1, 0)
    assert all(
        client.get_owner(group_of(job), resource_of(p)).session_id == 0 for p in range(PARTITIONS)
    )  # the winners' claims were let go
    assert committed_version(client, job) == 1


def test_a_claim_takes_over_a_partition_held_at_a_higher_generation(coord1):
    """The first claim is at generation 1; a holder at a higher generation refuses it
    naming its generation, and the claim at that one severs the holder."""
    with Client(coord1.endpoints) as client:
        for _ in range(3):  # the partition's generation climbs to 3, held by the last
            holder, first = claim(client, "held", 0)
            holder.detach()
        assert first.token.generation == 3
        session, taker = claim(client, "held", 0)
        try:
            assert taker.token.generation == 4
            assert taker.token.epoch == first.token.epoch + 1
            owner = client.get_owner(group_of("held"), resource_of(0))
            assert (owner.session_id, owner.generation) == (taker.session_id, 4)
            with pytest.raises(SessionGoneError):  # the holder was severed
                client.close_session(first.session_id)
        finally:
            session.close()


def test_a_task_of_a_superseded_run_takes_no_partition(tmp_path, coord1):
    """The run check overlaps the opening of the attempt's session, but nothing is owned
    before it passed: a task of an older run fails naming the newer run, and the newer
    run's attempt keeps the partition (not severed, same generation)."""
    job = "superseded"
    opts = _prepared(tmp_path, coord1, job)
    client = client_for(opts.endpoints, opts.tls)
    older = start_run(client, job)
    newer = start_run(client, job)
    session, attempt = claim(client, job, 0, run=newer, version=1, run_job=job)
    try:
        with pytest.raises(
            RunFencedError, match=f"run {older} was superseded by the newer run {newer}"
        ):
            write_partition(opts, 0, iter([batch(0, 10)]), older, 1)
        owner = client.get_owner(group_of(job), resource_of(0))
        assert (owner.session_id, owner.generation) == (
            attempt.session_id,
            attempt.token.generation,
        )
        assert not session.fenced.is_set()
    finally:
        session.close()
