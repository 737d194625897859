"""A newer run started after an older run's driver has decided to publish and before
the sink publishes: the older run's publish must fail naming the newer run, on every
sink, even though no attempt of the newer run has reached the sink yet (so no fence row
can refuse it). The driver's commit (`datasource.publish`) runs without Spark here: the
attempt is written by `write_partition` in this process, and the newer run starts at
the one point the test plants it, just as the sink's publish is called."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coord.client import Client
from coord.client.recipes.fence import RunFencedError
from coord.spark import datasource
from coord.spark.datasource import PartitionResult, begin_run, prepare_sink, write_partition
from coord.spark.jobs import committed_version
from coord.spark.options import WriteOptions, parse_options
from coord.spark.sinks import Sink, open_sink
from coord.testing import LocalCluster, cluster
from tests.spark.test_sinks import KINDS, SCHEMA, batch, ids, sink_spec

pytestmark = [pytest.mark.cluster]  # a real PostgreSQL server for the postgres cases


@pytest.fixture(scope="module")
def coord1() -> Iterator[LocalCluster]:
    """One in-process member: the test needs coord's runs and claims, not a cluster."""
    with cluster(members=1, in_process=True) as c:
        yield c


def _older_run_written(spec: dict[str, str], coord1: LocalCluster, client: Client,
                       job: str) -> tuple[WriteOptions, int, PartitionResult]:
    """Version 1 of `job` into the sink `spec` names: its options, the run its driver
    started, and partition 0's attempt of that run, written and sealed (10 rows)."""
    opts = parse_options({**spec, "endpoints": ",".join(coord1.endpoints), "job": job,
                          "version": "1"})
    prepare_sink(opts, SCHEMA)
    sink = open_sink(opts.sink)
    try:
        older = begin_run(client, job, sink)
    finally:
        sink.close()
    written = write_partition(opts, 0, iter([batch(0, 10)]), older, 1)
    assert written.rows == 10
    return opts, older, written


def _open_with_a_newer_run_first(client: Client, job: str, started: list[int]):
    """`open_sink` whose sink, when asked to publish, first has a newer run of `job`
    started the way a driver starts one (`begin_run`, through a sink of its own), then
    publishes: the interleaving of an older run's commit with a newer run's start that
    no attempt of the newer run has reached the sink in."""
    real_open = datasource.open_sink

    def open_it(options: dict[str, str]) -> Sink:
        sink = real_open(options)
        real_publish = sink.publish

        def publish(*args, **kwargs) -> bool:
            other = real_open(options)
            try:
                started.append(begin_run(client, job, other))
            finally:
                other.close()
            return real_publish(*args, **kwargs)

        sink.publish = publish  # type: ignore[method-assign]
        return sink

    return open_it


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_started_just_before_the_sink_publishes_fails_the_older_run(
        kind, request, tmp_path, coord1, monkeypatch):
    job = f"overtaken-{kind}"
    spec = sink_spec(kind, request, tmp_path)
    with Client(coord1.endpoints) as client:
        opts, older, written = _older_run_written(spec, coord1, client, job)
        started: list[int] = []
        monkeypatch.setattr(datasource, "open_sink",
                            _open_with_a_newer_run_first(client, job, started))
        with pytest.raises(RunFencedError,
                           match=f"run {older} was superseded by the newer run {older + 1}"):
            datasource.publish(opts, job, older, 1, [written])
        assert started == [older + 1]  # the interleaving was planted
        monkeypatch.undo()
        sink = open_sink(opts.sink)
        try:
            assert ids(sink) == [] and sink.committed_version(job) is None
            published = [r for r in sink.log().to_pylist() if r["op"] == "publish"]
            assert published == []
        finally:
            sink.close()
        assert committed_version(client, job) is None


def _waiting_for_run_lock(kind: str, spec: dict[str, str]) -> bool:
    """Is a driver blocked on the sink's run lock (`Sink.starting_run`)? PostgreSQL
    shows an advisory lock not granted; a Parquet directory's flock waiter shows in
    /proc/locks (`->`) on the lock file's inode."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(spec["url"], autocommit=True) as db:
            return db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                              "AND NOT granted").fetchone()[0] > 0
    inode = os.stat(Path(spec["path"]) / "_coord" / "locks" / "runs.lock").st_ino
    return any("->" in line and line.split()[6].endswith(f":{inode}")
               for line in Path("/proc/locks").read_text().splitlines())


# SQLite is left out: its run lock is BEGIN IMMEDIATE, the database's one write lock,
# whose waiters nothing shows.
@pytest.mark.parametrize("kind", ["postgres", "parquet"])
def test_a_run_cannot_start_between_the_publish_check_and_its_commit(
        kind, request, tmp_path, coord1, monkeypatch):
    """Once the older run's publish has checked its run, a newer run's start waits for
    the publish to commit: the newer driver, let go while the publish holds the check,
    finds the version published when it finally starts its run."""
    job = f"waits-{kind}"
    spec = sink_spec(kind, request, tmp_path)
    with Client(coord1.endpoints) as client:
        opts, older, written = _older_run_written(spec, coord1, client, job)
        seen: list[int | None] = []  # the version published when the newer run started
        real_start, real_check = datasource.start_run, datasource.check_run

        def start_seeing(client: Client, job: str) -> int:
            probe = open_sink(opts.sink)
            try:
                seen.append(probe.committed_version(job))
            finally:
                probe.close()
            return real_start(client, job)

        def start_newer() -> None:
            other = open_sink(opts.sink)
            try:
                begin_run(client, job, other)
            finally:
                other.close()

        newer = threading.Thread(target=start_newer)

        def check_then_let_a_newer_run_start(*args):
            checked = real_check(*args)
            newer.start()
            deadline = time.monotonic() + 30
            while newer.is_alive() and not _waiting_for_run_lock(kind, spec):
                assert time.monotonic() < deadline, "the newer driver neither started nor waited"
                time.sleep(0.01)
            return checked

        monkeypatch.setattr(datasource, "start_run", start_seeing)
        monkeypatch.setattr(datasource, "check_run", check_then_let_a_newer_run_start)
        try:
            assert datasource.publish(opts, job, older, 1, [written]) is None
        finally:
            newer.join(30)
        assert not newer.is_alive()
        assert seen == [1]  # it started only once the publish had committed
