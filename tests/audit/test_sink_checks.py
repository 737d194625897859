"""The sink checks over a real sink's log: a zombie fenced mid-write by its replacement,
on a SQLite table and a Parquet directory, passes every check; each check catches the
violation planted for it in that same log (a write accepted after the fence, a sequence
gap and a repeat, a publish of an attempt that did not hold the partition)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coord.audit.checks import SINK_CHECKS
from coord.audit.job import run_audit
from coord.client.recipes.fence import FencedWriteError, Token
from coord.history.sink import HistorySink
from coord.history.synth import synthesize
from coord.spark.sinks import open_sink
from coord.spark.sinks.log import LOG_SCHEMA, export_log

EXPECTED = ("sink.no_fenced_writes", "sink.sequences", "sink.publish_holder")
SCHEMA = pa.schema([("id", pa.int64())])
OLD = Token(1, 7, 0, run=1, version=1)
NEW = Token(2, 7, 1, run=1, version=1)
OTHER = Token(1, 9, 0, run=1, version=1)


def _batch(lo: int, hi: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(lo, hi), pa.int64())], schema=SCHEMA)


def write_zombie_job(options: dict[str, str]) -> pa.Table:
    """Partition 0: OLD writes two batches, NEW begins (fencing OLD), OLD's third batch
    is refused, NEW writes and seals; partition 1: one attempt. Published as version 1.
    The sink's log of it."""
    sink = open_sink(options)
    try:
        if hasattr(sink, "prepare"):
            sink.prepare(SCHEMA)
        sink.begin("j", 0, OLD)
        sink.append("j", 0, OLD, 1, _batch(0, 10))
        sink.append("j", 0, OLD, 2, _batch(10, 20))
        sink.begin("j", 0, NEW)
        with pytest.raises(FencedWriteError):
            sink.append("j", 0, OLD, 3, _batch(20, 30))
        sink.append("j", 0, NEW, 1, _batch(0, 15))
        sink.append("j", 0, NEW, 2, _batch(15, 30))
        sink.seal("j", 0, NEW, 3, 30)
        sink.begin("j", 1, OTHER)
        sink.append("j", 1, OTHER, 1, _batch(30, 35))
        sink.seal("j", 1, OTHER, 2, 5)
        assert sink.publish("j", 1, {0: (NEW, 30), 1: (OTHER, 5)})
        return sink.log()
    finally:
        sink.close()


@pytest.fixture(scope="module", params=["sqlite", "parquet"])
def real_log(request, tmp_path_factory) -> pa.Table:
    tmp = tmp_path_factory.mktemp(f"sink-{request.param}")
    options = ({"sink": "sqlite", "path": str(tmp / "out.db"), "table": "out"}
               if request.param == "sqlite" else {"sink": "parquet", "path": str(tmp / "out")})
    return write_zombie_job(options)


def _checked(spark, log: pa.Table, name: str) -> list:
    return SINK_CHECKS[name](spark.createDataFrame(log.to_pandas())).collect()


def _with(log: pa.Table, *rows: dict) -> pa.Table:
    """`log` and `rows` after it (ids continuing), as the sink would have logged them."""
    last = max(log.column("id").to_pylist())
    extra = [{**r, "id": last + i, "at_ms": 0} for i, r in enumerate(rows, 1)]
    return pa.concat_tables([log, pa.Table.from_pylist(extra, schema=LOG_SCHEMA)])


def _row(op: str, token: Token, seq: int | None, rows: int, partition: int = 0) -> dict:
    return {"op": op, "job": "j", "partition": partition, **token.as_dict(),
            "sequence": seq, "rows": rows}


def test_the_sink_checks_are_the_expected_ones():
    assert tuple(SINK_CHECKS) == EXPECTED


def test_the_real_log_records_what_the_sink_accepted(real_log):
    ops = [(r["op"], r["pid"], r["epoch"], r["sequence"]) for r in real_log.to_pylist()
           if r["partition"] == 0]
    assert ops == [("append", 7, 0, 0), ("append", 7, 0, 1), ("append", 7, 0, 2),
                   ("append", 7, 1, 0), ("append", 7, 1, 1), ("append", 7, 1, 2),
                   ("seal", 7, 1, 3), ("publish", 7, 1, None)]


@pytest.mark.parametrize("name", EXPECTED)
def test_a_real_log_passes(spark, real_log, name):
    assert _checked(spark, real_log, name) == []


def _plant_fenced_write(log: pa.Table) -> pa.Table:
    # the zombie's refused batch, accepted instead
    return _with(log, _row("append", OLD, 3, 10))


def _plant_gap(log: pa.Table) -> pa.Table:
    rows = [r for r in log.to_pylist()
            if not (r["op"] == "append" and r["epoch"] == 1 and r["sequence"] == 1)]
    return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)


def _plant_repeat(log: pa.Table) -> pa.Table:
    return _with(log, _row("append", OTHER, 1, 5, partition=1))


def _plant_non_owner_publish(log: pa.Table) -> pa.Table:
    # version 2 publishes the fenced attempt of partition 0
    return _with(log, _row("publish", OLD, None, 20))


PLANTS = [("sink.no_fenced_writes", _plant_fenced_write, "pid 7 epoch 0"),
          ("sink.sequences", _plant_gap, "a sequence missing"),
          ("sink.sequences", _plant_repeat, "a sequence repeated"),
          ("sink.publish_holder", _plant_non_owner_publish, "published pid 7 epoch 0")]


@pytest.mark.parametrize(("name", "plant", "says"), PLANTS,
                         ids=[f"{n}-{p.__name__}" for n, p, _ in PLANTS])
def test_each_check_catches_its_plant(spark, real_log, name, plant, says):
    found = _checked(spark, plant(real_log), name)
    assert len(found) == 1, found
    assert says in found[0]["detail"]
    assert found[0]["evidence"]


def test_every_expected_check_has_a_plant():
    assert {n for n, _, _ in PLANTS} == set(EXPECTED)


def test_the_audit_runs_the_sink_checks_on_an_exported_log(spark, real_log, tmp_path):
    history = tmp_path / "h"
    HistorySink(history).write(synthesize(300, seed=1))
    planted = export_log(_plant_fenced_write(real_log), tmp_path / "sink")
    result = run_audit(spark, history, sink_log=planted, report_dir=tmp_path / "report")
    assert {n: result.count(n) for n in EXPECTED} == {
        "sink.no_fenced_writes": 1, "sink.sequences": 0, "sink.publish_holder": 0}
    assert "sink.no_fenced_writes" in (tmp_path / "report" / "index.html").read_text()
