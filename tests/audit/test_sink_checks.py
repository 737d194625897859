"""The sink checks over a real sink's log and a real coord's history: the attempts claim
their partitions in a one-member coord (in this process, ready in tens of ms), a zombie
is fenced mid-write by its replacement on a SQLite table and a Parquet directory, and
coord's history is exported. That log passes every check; each check catches the
violation planted for it in that same log (a write accepted after the fence, a sequence
gap and a repeat, a publish of an attempt that did not hold the partition, a token coord
never granted, a producer epoch issued after the grant had ended, a write and a publish
after coord's history shows the partition taken over, a publish checked after a newer
run had started or before its own); the zombie's refusal passes the refusal check, which
catches a refusal for a holder coord never granted and one for a holder older than the
token it refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from coord.audit.checks import SINK_CHECKS
from coord.audit.checks.sink_coord import tokens
from coord.audit.job import run_audit
from coord.audit.load import load_history
from coord.client import Client
from coord.client.recipes.fence import FencedWriteError, Token
from coord.history.sink import HistorySink
from coord.spark.attempt import RUN, RunCheck, check_run, claim, group_of, start_run
from coord.spark.sinks import open_sink
from coord.spark.sinks.base import Refusal
from coord.spark.sinks.log import LOG_SCHEMA, export_log, refusals_table, with_coord_names
from coord.testing import cluster

EXPECTED = ("sink.no_fenced_writes", "sink.sequences", "sink.publish_holder",
            "sink.tokens_granted", "sink.coord_fenced_writes", "sink.coord_publish_holder",
            "sink.publish_run_newest", "sink.refusal_holder_granted")
SCHEMA = pa.schema([("id", pa.int64())])


def _batch(lo: int, hi: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(lo, hi), pa.int64())], schema=SCHEMA)


class Coord:
    """What coord hands out, in its order: run 1 of job j; OLD claims partition 0, NEW
    takes it over (severing OLD), OTHER claims partition 1; the driver checks its run
    (`checked`, before the publish); `finish` (after the publish) ends the winners'
    sessions, starts run 2, lets LATER (run 2's attempt, which never writes) claim
    partition 0 and exports coord's history to `history` (`run_grants`: the revision of
    each run's grant of the run slot there)."""

    OLD: Token
    NEW: Token
    OTHER: Token
    LATER: Token
    checked: RunCheck
    run_grants: dict[int, int]
    refusals: dict[str, list[Refusal]]  # each sink's, set by `real_logs`

    def __init__(self, client: Client, history: Path) -> None:
        self.client, self.history = client, history
        run = start_run(client, "j")
        self._sessions = []
        for name, partition in (("OLD", 0), ("NEW", 0), ("OTHER", 1)):
            session, attempt = claim(client, "j", partition, run=run, version=1)
            self._sessions.append(session)
            setattr(self, name, attempt.token)
        self.checked = check_run(client, "j", run)

    def finish(self) -> None:
        for session in self._sessions:
            session.close()
        session, attempt = claim(self.client, "j", 0, run=start_run(self.client, "j"),
                                 version=2)
        self.LATER = attempt.token
        session.close()
        rows = [r for page in self.client.export_history() for r in page.rows]
        self.run_grants = {r["generation"]: r["revision"] for r in rows
                           if r["kind"] == "owner.grant"
                           and (r.get("group"), r.get("resource")) == (group_of("j"), RUN)}
        HistorySink(self.history).write(rows)


@pytest.fixture(scope="module")
def coord(tmp_path_factory) -> Coord:
    with cluster(members=1, in_process=True) as c, Client(c.endpoints) as client:
        made = Coord(client, tmp_path_factory.mktemp("coord") / "history")
        yield made


def write_zombie_job(options: dict[str, str], coord: Coord) -> tuple[pa.Table, list]:
    """Partition 0: OLD writes two batches, NEW begins (fencing OLD), OLD's third batch
    is refused, NEW writes and seals; partition 1: one attempt. Published as version 1.
    The sink's log of it, and its refusals."""
    OLD, NEW, OTHER = coord.OLD, coord.NEW, coord.OTHER
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
        assert sink.publish("j", 1, {0: (NEW, 30), 1: (OTHER, 5)}, lambda: coord.checked)
        return sink.log(), sink.refusals()
    finally:
        sink.close()


@pytest.fixture(scope="module")
def real_logs(tmp_path_factory, coord) -> dict[str, pa.Table]:
    """The zombie job through a SQLite table and a Parquet directory (the same tokens),
    then coord's side finished: the winners' sessions end, LATER claims, the export."""
    logs, refusals = {}, {}
    for kind in ("sqlite", "parquet"):
        tmp = tmp_path_factory.mktemp(f"sink-{kind}")
        options = ({"sink": "sqlite", "path": str(tmp / "out.db"), "table": "out"}
                   if kind == "sqlite" else {"sink": "parquet", "path": str(tmp / "out")})
        logs[kind], refusals[kind] = write_zombie_job(options, coord)
    coord.finish()
    coord.refusals = refusals
    return logs


@pytest.fixture(scope="module", params=["sqlite", "parquet"])
def real_log(request, real_logs) -> pa.Table:
    return real_logs[request.param]


@pytest.fixture(scope="module")
def history(spark, coord, real_logs):
    return load_history(spark, coord.history)


def _checked(spark, history, log: pa.Table, name: str,
             refusals: list[Refusal] = ()) -> list:
    df = spark.createDataFrame(with_coord_names(log))
    refused = spark.createDataFrame(refusals_table(list(refusals)))
    return SINK_CHECKS[name](df, tokens(history, df), history, refused).collect()


def _with(log: pa.Table, *rows: dict) -> pa.Table:
    """`log` and `rows` after it (ids continuing), as the sink would have logged them."""
    last = max(log.column("id").to_pylist())
    extra = [{**r, "id": last + i, "at_ms": 0} for i, r in enumerate(rows, 1)]
    return pa.concat_tables([log, pa.Table.from_pylist(extra, schema=LOG_SCHEMA)])


def _row(op: str, token: Token, seq: int | None, rows: int, partition: int = 0,
         checked: RunCheck | None = None) -> dict:
    return {"op": op, "job": "j", "partition": partition, **token.as_dict(),
            "sequence": seq, "rows": rows, "run_job": checked and checked.job,
            "checked_revision": checked and checked.revision}


def test_the_sink_checks_are_the_expected_ones():
    assert tuple(SINK_CHECKS) == EXPECTED


def test_the_real_log_records_what_the_sink_accepted(real_log, coord):
    ops = [(r["op"], r["epoch"], r["sequence"], r["revision"]) for r in real_log.to_pylist()
           if r["partition"] == 0]
    old, new = coord.OLD.revision, coord.NEW.revision
    assert 0 < old < new
    assert ops == [("append", 0, 0, old), ("append", 0, 1, old), ("append", 0, 2, old),
                   ("append", 1, 0, new), ("append", 1, 1, new), ("append", 1, 2, new),
                   ("seal", 1, 3, new), ("publish", 1, None, new)]
    checks = {(r["op"], r["run_job"], r["checked_revision"]) for r in real_log.to_pylist()}
    assert checks == {("append", None, None), ("seal", None, None),
                      ("publish", "j", coord.checked.revision)}
    # the driver read its run's slot after the last claim, before run 2 took it
    assert coord.run_grants[1] < new <= coord.checked.revision < coord.run_grants[2]
    named = with_coord_names(real_log).to_pylist()
    assert {(r["op"], r["run_group"], r["run_resource"]) for r in named} == {
        ("append", None, None), ("seal", None, None), ("publish", "spark/j", "run")}


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_a_real_log_passes(spark, history, real_log, name):
    assert _checked(spark, history, real_log, name) == []


def test_the_real_refusal_names_its_holder_and_passes(spark, history, coord, real_logs):
    for kind in ("sqlite", "parquet"):
        assert [(r.token, r.sequence, r.held) for r in coord.refusals[kind]] == [
            (coord.OLD, 3, coord.NEW)]
    assert _checked(spark, history, real_logs["sqlite"], "sink.refusal_holder_granted",
                    coord.refusals["parquet"]) == []


# Each plant takes the real log and the coord that made it.
def _plant_fenced_write(log: pa.Table, coord: Coord) -> pa.Table:
    # the zombie's refused batch, accepted instead
    return _with(log, _row("append", coord.OLD, 3, 10))


def _plant_fenced_write_of_a_newer_run(log: pa.Table, coord: Coord) -> pa.Table:
    # the zombie's batch claiming a newer run: the sink's own order takes it for the
    # newer attempt; coord's history shows its grant taken over by NEW's
    return _with(log, _row("append", replace(coord.OLD, run=coord.OLD.run + 1), 0, 0))


def _plant_gap(log: pa.Table, coord: Coord) -> pa.Table:
    rows = [r for r in log.to_pylist()
            if not (r["op"] == "append" and r["epoch"] == 1 and r["sequence"] == 1)]
    return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)


def _plant_repeat(log: pa.Table, coord: Coord) -> pa.Table:
    return _with(log, _row("append", coord.OTHER, 1, 5, partition=1))


def _plant_non_owner_publish(log: pa.Table, coord: Coord) -> pa.Table:
    # version 2 publishes the fenced attempt of partition 0
    return _with(log, _row("publish", coord.OLD, None, 20))


def _plant_ungranted_token(log: pa.Table, coord: Coord) -> pa.Table:
    # a generation coord never granted for partition 0, at NEW's revision
    forged = replace(coord.NEW, generation=coord.NEW.generation + 5)
    return _with(log, _row("append", forged, 0, 0))


def _plant_epoch_after_the_grant(log: pa.Table, coord: Coord) -> pa.Table:
    # OLD's grant with NEW's producer epoch, which coord issued after NEW took over
    return _with(log, _row("append", replace(coord.OLD, epoch=coord.NEW.epoch), 0, 0))


def _plant_epoch_before_the_grant(log: pa.Table, coord: Coord) -> pa.Table:
    # NEW's grant with OLD's producer epoch, which coord issued before NEW's grant
    return _with(log, _row("append", replace(coord.NEW, epoch=coord.OLD.epoch), 0, 0))


def _plant_epoch_never_issued(log: pa.Table, coord: Coord) -> pa.Table:
    return _with(log, _row("append", replace(coord.NEW, epoch=coord.NEW.epoch + 5), 0, 0))


def _plant_publish_after_takeover(log: pa.Table, coord: Coord) -> pa.Table:
    # LATER's announcement reaches the sink, then NEW's attempt is published again
    return _with(log, _row("append", coord.LATER, 0, 0),
                 _row("publish", coord.NEW, None, 30))


def _plant_publish_after_a_newer_run(log: pa.Table, coord: Coord) -> pa.Table:
    # run 1's publish again, its driver's check reading run 2's grant revision as run 1's
    late = replace(coord.checked, revision=coord.run_grants[2])
    return _with(log, _row("publish", coord.NEW, None, 30, checked=late))


def _plant_publish_before_its_run(log: pa.Table, coord: Coord) -> pa.Table:
    # a check that claims run 1 was the newest before coord granted run 1 at all
    early = replace(coord.checked, revision=coord.run_grants[1] - 1)
    return _with(log, _row("publish", coord.NEW, None, 30, checked=early))


def _plant_refusal_by_an_ungranted_holder(log: pa.Table, coord: Coord) -> tuple:
    # the zombie's refusal, for a holder generation coord never granted
    return log, [Refusal("j", 0, coord.OLD, 3, "FENCED_GENERATION",
                         replace(coord.NEW, generation=coord.NEW.generation + 5))]


def _plant_refusal_by_an_older_holder(log: pa.Table, coord: Coord) -> tuple:
    # NEW refused for OLD, whose grant coord made before NEW's
    return log, [Refusal("j", 0, coord.NEW, 1, "FENCED_GENERATION", coord.OLD)]


PLANTS = [
    ("sink.no_fenced_writes", _plant_fenced_write, "after it had accepted the newer"),
    ("sink.sequences", _plant_gap, "a sequence missing"),
    ("sink.sequences", _plant_repeat, "a sequence repeated"),
    ("sink.publish_holder", _plant_non_owner_publish, "but the partition was held by"),
    ("sink.tokens_granted", _plant_ungranted_token, "has no grant of spark/j/p0"),
    ("sink.tokens_granted", _plant_epoch_after_the_grant, "after the grant had ended"),
    ("sink.tokens_granted", _plant_epoch_before_the_grant, "before the grant"),
    ("sink.tokens_granted", _plant_epoch_never_issued, "never issued that pid and epoch"),
    ("sink.coord_fenced_writes", _plant_fenced_write, "ended that grant"),
    ("sink.coord_fenced_writes", _plant_fenced_write_of_a_newer_run, "ended that grant"),
    ("sink.coord_publish_holder", _plant_publish_after_takeover, "ended that grant"),
    ("sink.publish_run_newest", _plant_publish_after_a_newer_run, "to the newer run 2"),
    ("sink.publish_run_newest", _plant_publish_before_its_run, "no grant of spark/j/run"),
    ("sink.refusal_holder_granted", _plant_refusal_by_an_ungranted_holder,
     "has no grant of spark/j/p0"),
    ("sink.refusal_holder_granted", _plant_refusal_by_an_older_holder,
     "no later than the refused token"),
]


@pytest.mark.parametrize(("name", "plant", "says"), PLANTS,
                         ids=[f"{n}-{p.__name__}" for n, p, _ in PLANTS])
def test_each_check_catches_its_plant(spark, history, coord, real_logs, name, plant, says):
    # planted in the SQLite sink's log only: the Parquet sink's log has the same rows
    # (test_a_real_log_passes runs both), and every Spark query here costs seconds
    planted = plant(real_logs["sqlite"], coord)
    log, refusals = planted if isinstance(planted, tuple) else (planted, ())
    found = _checked(spark, history, log, name, refusals)
    assert len(found) == 1, found
    assert says in found[0]["detail"]
    assert found[0]["evidence"][0], found[0]["evidence"]


def test_every_expected_check_has_a_plant():
    assert {n for n, _, _ in PLANTS} == set(EXPECTED)


def test_only_coord_s_history_shows_a_fenced_write_that_claims_a_newer_run(
        spark, history, coord, real_logs):
    planted = _plant_fenced_write_of_a_newer_run(real_logs["sqlite"], coord)
    assert _checked(spark, history, planted, "sink.no_fenced_writes") == []


def test_a_token_coord_never_granted_does_not_count_as_coord_s_takeover(
        spark, history, coord, real_logs):
    # a forged token "granted" far ahead of coord, then NEW's attempt published again:
    # only the forged token is blamed, not the publish it would seem to have fenced
    forged = replace(coord.NEW, generation=99, revision=10**9)
    planted = _with(real_logs["sqlite"], _row("append", forged, 0, 0),
                    _row("publish", coord.NEW, None, 30))
    assert _checked(spark, history, planted, "sink.coord_publish_holder") == []
    assert len(_checked(spark, history, planted, "sink.tokens_granted")) == 1


def test_the_audit_runs_the_sink_checks_on_an_exported_log(spark, coord, real_logs,
                                                           tmp_path):
    planted = export_log(_plant_fenced_write(real_logs["sqlite"], coord), tmp_path / "sink",
                         coord.refusals["sqlite"])
    # the sink checks only: tests/spark/test_sink_audit.py runs them beside every other
    result = run_audit(spark, coord.history, checks=EXPECTED, sink_log=planted,
                       report_dir=tmp_path / "report")
    assert {n: result.count(n) for n in EXPECTED} == {
        **dict.fromkeys(EXPECTED, 0), "sink.no_fenced_writes": 1,
        "sink.coord_fenced_writes": 1}
    assert result.violations == 2, result.examples
    assert result.summary["sink_tokens"] == {"tokens": 3, "granted_in_history": 3}
    assert "sink.coord_fenced_writes" in (tmp_path / "report" / "index.html").read_text()


def test_a_repeated_sequence_is_cited_with_its_repeat(spark, history, coord, real_logs):
    # the evidence lists the producer's sequences, a repeat as often as accepted
    [v] = _checked(spark, history, _plant_repeat(real_logs["sqlite"], coord),
                   "sink.sequences")
    seqs = [int(s) for s in v["evidence"][0].removeprefix("sequences ").split(",")]
    assert seqs.count(1) == 2, v["evidence"]


@pytest.mark.parametrize(("check_at", "why"), [
    (lambda g: g[1], "a check at exactly its own run's grant"),
    (lambda g: g[2] - 1, "a newer run granted just after the check"),
])
def test_a_publish_checked_while_its_run_was_newest_is_not_flagged(
        spark, history, coord, real_logs, check_at, why):
    # the edges of "at or below the checked revision": a grant at the checked revision
    # counts, one a revision later does not
    at = replace(coord.checked, revision=check_at(coord.run_grants))
    planted = _with(real_logs["sqlite"], _row("publish", coord.NEW, None, 30, checked=at))
    assert _checked(spark, history, planted, "sink.publish_run_newest") == [], why
