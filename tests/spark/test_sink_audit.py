"""End to end: the fenced writer under real Spark against a real 3-member coord cluster,
one task's Python worker killed (kill -9) mid-write; then coord's history and the SQLite
sink's log are exported and `coord audit` runs every check, the sink checks and their
join with coord's history included, and finds nothing."""

from __future__ import annotations

import pytest

from coord.audit.checks import SINK_CHECKS
from coord.audit.checks.sink_coord import tokens
from coord.audit.job import run_audit
from coord.audit.load import load_history
from coord.client import Client
from coord.history.sink import HistorySink
from coord.spark.sink_log_files import LOG_FILE
from coord.spark.sinks import SqliteSink
from coord.spark.sinks.log import export_log
from tests.spark.test_spark_writer import PARTS, N, fenced, frame, ids

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.mark.slow
def test_a_killed_worker_s_job_passes_the_sink_audit(spark, coord3, tmp_path):
    fenced(frame(spark), coord3, "audited", version="1", format="coord-fenced-faulty",
           fail_partition="3", fail_after_rows="1000", fail_by="kill", sink="sqlite",
           path=str(tmp_path / "f.db"), table="out").save()
    sink = SqliteSink(str(tmp_path / "f.db"), "out")
    try:
        assert ids(sink) == list(range(N))
        log, refusals = sink.log(), sink.refusals()
    finally:
        sink.close()
    appends = [r for r in log.to_pylist() if r["op"] == "append" and r["job"] == "audited"]
    # the fault happened: partition 3 has a second attempt, after the first wrote rows
    assert {r["epoch"] for r in appends if r["partition"] == 3} == {0, 1}
    assert sum(r["rows"] for r in appends if r["partition"] == 3 and r["epoch"] == 0) >= 1000
    assert len([r for r in log.to_pylist() if r["op"] == "publish"]) == PARTS
    with Client(coord3.endpoints) as client:
        HistorySink(tmp_path / "h").write(r for page in client.export_history()
                                          for r in page.rows)
    exported = export_log(log, tmp_path / "sink", refusals)
    # the join has something to judge: coord's history ended the killed attempt's grant
    # no later than it granted the replacement that the sink accepted after it
    toks = {r["epoch"]: r for r in tokens(load_history(spark, tmp_path / "h"),
                                          spark.read.parquet(str(exported / LOG_FILE)))
            .filter("job = 'audited' AND partition = 3").collect()}
    assert toks[0]["end_row"]["revision"] <= toks[1]["revision"]
    result = run_audit(spark, tmp_path / "h", sink_log=exported, with_stats=False)
    assert {n: result.count(n) for n in SINK_CHECKS} == dict.fromkeys(SINK_CHECKS, 0)
    assert result.violations == 0, result.examples
