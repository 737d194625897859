"""The driver killed (kill -9) between the sink's publish and coord's record of the job
version — the one window in which the two disagree (coord/spark/jobs.py) — then the same
job (same name, same version) run again. A driver of its own (tests/spark/driver_job.py,
a process group: the Python driver and its JVM) is held at that point by the failpoint
$COORD_SPARK_PAUSE_AFTER_PUBLISH (coord/spark/datasource.py: the commit writes its pid
to a marker file and stops), and killed there with its commit process. What the design
promises: the sink has published every row once and recorded version 1 with them;
coord has recorded nothing; the re-run finds the sink's record, catches coord up and
writes nothing (a no-op); and `coord audit` with the sink's log finds no violation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coord.audit.checks import SINK_CHECKS
from coord.audit.job import run_audit
from coord.client import Client
from coord.history.sink import HistorySink
from coord.spark.datasource import PAUSE_AFTER_PUBLISH
from coord.spark.jobs import committed_version
from coord.spark.sinks import SqliteSink
from coord.spark.sinks.log import export_log
from tests.spark.driver_job import PARTS, ROWS
from tests.spark.test_spark_writer import fenced, frame, ids

# slow (make test-slow): a driver process of its own; the suite's
# test_spark_writer.py::test_rerunning_a_published_version_is_a_no_op covers the same
# catch-up, with coord's record deleted instead of never written
pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
JOB = "driver-killed"


def _kill_at_the_pause(coord3, db: Path, marker: Path, out: Path) -> None:
    """Start the driver, wait for its commit to stop at the pause point, kill -9 the
    driver's process group and the commit's process."""
    env = dict(os.environ, **{PAUSE_AFTER_PUBLISH: str(marker)})
    with out.open("w") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.driver_job", ",".join(coord3.endpoints),
             str(db), JOB], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not marker.exists():
            assert driver.poll() is None, f"the driver ended first:\n{out.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the driver never reached the pause point"
            time.sleep(0.1)
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the commit, stopped there
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)


def test_a_driver_killed_between_the_sink_s_publish_and_coord_s_record(
        spark, coord3, tmp_path):
    db = tmp_path / "f.db"
    _kill_at_the_pause(coord3, db, tmp_path / "paused", tmp_path / "driver.log")
    sink = SqliteSink(str(db), "out")
    try:
        assert sink.committed_version(JOB) == 1  # published, with every row once
        assert ids(sink) == list(range(ROWS))
        log_rows = sink.log().num_rows
    finally:
        sink.close()
    with Client(coord3.endpoints) as client:
        assert committed_version(client, JOB) is None  # killed before coord's record

    # the same job again: a no-op that catches coord up
    fenced(frame(spark, ROWS, PARTS), coord3, JOB, version="1", sink="sqlite",
           path=str(db), table="out").save()
    sink = SqliteSink(str(db), "out")
    try:
        assert ids(sink) == list(range(ROWS))
        log = sink.log()
    finally:
        sink.close()
    assert log.num_rows == log_rows  # the re-run wrote nothing
    assert [r["op"] for r in log.to_pylist()].count("publish") == PARTS
    with Client(coord3.endpoints) as client:
        assert committed_version(client, JOB) == 1
        HistorySink(tmp_path / "h").write(r for page in client.export_history()
                                          for r in page.rows)
    result = run_audit(spark, tmp_path / "h", sink_log=export_log(log, tmp_path / "sink"),
                       with_stats=False)
    assert {n: result.count(n) for n in SINK_CHECKS} == dict.fromkeys(SINK_CHECKS, 0)
    assert result.violations == 0, result.examples
