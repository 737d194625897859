"""A synthesized history with fenced Spark jobs in it (`coord.spark.synth`) and their
sink's log: the pair passes every sink check, by name, and the checks catch what is
planted in that log (a sequence sent twice, a fenced attempt's write accepted). The
jobs are small and their faults frequent, so a few hundred log rows hold retried tasks,
speculative losers and restarted drivers."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coord.audit.checks import SINK_CHECKS
from coord.audit.checks.sink_coord import tokens
from coord.audit.job import run_audit
from coord.audit.load import load_history
from coord.history.sink import HistorySink
from coord.spark.sink_log_files import LOG_FILE, REFUSALS_FILE
from coord.spark.sinks.base import Refusal
from coord.spark.sinks.log import LOG_SCHEMA, LogFiles, export_log
from coord.spark.synth import Faults, Shape, SinkLogSynth

EXPECTED = (
    "sink.no_fenced_writes",
    "sink.sequences",
    "sink.publish_holder",
    "sink.tokens_granted",
    "sink.coord_fenced_writes",
    "sink.coord_publish_holder",
    "sink.publish_run_newest",
    "sink.refusal_holder_granted",
)
SMALL = Shape(
    jobs=(("orders", 3), ("clicks", 4)),
    max_batches=4,
    faults=Faults(retry=0.2, speculative=0.2, restart=0.3),
    share=0.9,
)


def synthesized(root, sink_rows: int = 300, seed: int = 1, **kw) -> SinkLogSynth:
    made = SinkLogSynth(root / "sink", sink_rows, seed, SMALL, **kw)
    HistorySink(root / "history").write(made.rows())
    return made


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple:
    root = tmp_path_factory.mktemp("synth")
    return root, synthesized(root)


def _log(root) -> pa.Table:
    return pq.read_table(root / "sink" / LOG_FILE).select(LOG_SCHEMA.names)


def _refusals(root) -> list[Refusal]:
    return [Refusal.of_row(r) for r in pq.read_table(root / "sink" / REFUSALS_FILE).to_pylist()]


def test_the_sink_checks_are_the_expected_ones():
    assert tuple(SINK_CHECKS) == EXPECTED


def test_the_jobs_meet_every_fault_and_the_sink_refuses_the_fenced(made):
    root, synth = made
    figures = synth.figures()
    assert figures["sink_rows"] >= 300
    for what in ("retries", "speculative_losers", "restarts", "refusals"):
        assert figures[what] > 0, figures
    refusals = _refusals(root)
    assert len(refusals) == figures["refusals"]
    # each refusal is a fenced attempt's write, judged against a newer holder
    assert {r.verdict for r in refusals} == {"FENCED_GENERATION"}
    assert all(r.held.revision > r.token.revision for r in refusals)
    log = _log(root)
    assert log.column("id").to_pylist() == list(range(1, log.num_rows + 1))


def test_the_same_seed_makes_the_same_log_in_any_parts(tmp_path, made):
    # parts of 7 rows: the log is written as it is made, never held whole
    again = synthesized(tmp_path, part_rows=7)
    assert again.figures() == made[1].figures()
    assert _log(tmp_path).equals(_log(made[0]))
    assert pq.ParquetFile(tmp_path / "sink" / LOG_FILE).num_row_groups > 10


@pytest.mark.slow
def test_the_synthesized_pair_passes_every_sink_check(spark, made):
    root, synth = made
    result = run_audit(
        spark, root / "history", checks=EXPECTED, sink_log=root / "sink", with_stats=False
    )
    assert {n: result.count(n) for n in EXPECTED} == dict.fromkeys(EXPECTED, 0), result.examples
    assert result.summary["sink_log_rows"] == synth.log_rows
    toks = result.summary["sink_tokens"]
    assert toks["tokens"] == toks["granted_in_history"] > 0


def _planted(root, tmp_path, row: dict) -> tuple:
    """The synthesized log with `row` accepted after everything else; the directory it
    is exported to, and the id the row got."""
    log = _log(root)
    planted_id = log.num_rows + 1
    extra = pa.Table.from_pylist([{**row, "id": planted_id}], schema=LOG_SCHEMA)
    out = export_log(pa.concat_tables([log, extra]), tmp_path / "planted", _refusals(root))
    return out, planted_id


def _found(spark, root, sink_dir, name: str) -> list:
    history = load_history(spark, root / "history")
    log = spark.read.parquet(str(sink_dir / LOG_FILE))
    refusals = spark.read.parquet(str(sink_dir / REFUSALS_FILE))
    return SINK_CHECKS[name](log, tokens(history, log), history, refusals).collect()


def test_a_sequence_sent_twice_is_caught(spark, made, tmp_path):
    root, _ = made
    twice = next(r for r in _log(root).to_pylist() if r["op"] == "append" and r["sequence"])
    sink_dir, _ = _planted(root, tmp_path, twice)
    found = _found(spark, root, sink_dir, "sink.sequences")
    assert len(found) == 1, found
    assert "a sequence repeated" in found[0]["detail"]
    assert found[0]["subject"].startswith(f"sink {twice['job']}/{twice['partition']} ")


def test_a_fenced_attempts_write_accepted_is_caught(spark, made, tmp_path):
    # the fence switched off: a write the sink refused is accepted instead
    root, _ = made
    zombie = _refusals(root)[0]
    row = {
        "op": "append",
        "job": zombie.job,
        "partition": zombie.partition,
        **zombie.token.as_dict(),
        "sequence": zombie.sequence,
        "rows": 10,
        "at_ms": 0,
    }
    sink_dir, planted_id = _planted(root, tmp_path, row)
    for name, says in (
        ("sink.no_fenced_writes", "after it had accepted the newer"),
        ("sink.coord_fenced_writes", "ended that grant"),
    ):
        found = _found(spark, root, sink_dir, name)
        assert [(f["check"], f["index"]) for f in found] == [(name, planted_id)], found
        assert says in found[0]["detail"]


@pytest.mark.parametrize(
    "bad",
    [{"share": 0.0}, {"share": 1.5}, {"jobs": ()}, {"jobs": (("j", 0),)}, {"max_batches": 0}],
)
def test_a_shape_the_jobs_could_never_finish_in_is_refused(bad):
    # share 0: the jobs get no tick, so the sink log never reaches its rows and synth
    # would run on without end
    with pytest.raises(ValueError):
        Shape(**bad)


def test_log_files_that_fail_to_open_leave_no_temp_file(tmp_path, monkeypatch):
    opened = []
    real = pq.ParquetWriter

    def second_fails(path, schema):
        if opened:
            raise OSError("planted: the second file cannot be opened")
        opened.append(real(path, schema))
        return opened[-1]

    monkeypatch.setattr(pq, "ParquetWriter", second_fails)
    with pytest.raises(OSError, match="planted"):
        LogFiles(tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("failing_rename", [1, 2])
def test_an_export_cut_off_between_its_files_never_pairs_a_log_with_others_refusals(
        made, tmp_path, monkeypatch, failing_rename):
    """A crash between the two renames (planted: the first or the second fails) leaves
    no log, never one beside the refusals of another export; the next export is whole."""
    import os

    root, _ = made
    log, refusals = _log(root), _refusals(root)
    assert len(refusals) >= 2
    out = tmp_path / "out"
    export_log(log.slice(0, 10), out, refusals[:1])  # the earlier export: 10 rows, 1 refusal
    real, renames = os.replace, []

    def cut_off(src, dst):
        renames.append(dst)
        if len(renames) == failing_rename:
            raise OSError("planted: the machine stops here")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", cut_off)
    with pytest.raises(OSError, match="planted"):
        export_log(log, out, refusals)
    monkeypatch.setattr(os, "replace", real)
    left = sorted(p.name for p in out.iterdir())
    assert LOG_FILE not in left, f"a log stayed beside refusals of another export: {left}"
    assert not [n for n in left if n.endswith(".tmp")], left
    export_log(log, out, refusals)
    assert pq.read_table(out / LOG_FILE).num_rows == log.num_rows
    assert pq.read_table(out / REFUSALS_FILE).num_rows == len(refusals)


def test_an_export_syncs_its_directory_after_each_rename(made, tmp_path, monkeypatch):
    """Two renames reach the disk in order only with a sync between them: the
    refusals' rename is made durable before the log's."""
    import os

    import coord.spark.sinks.log as sink_log

    root, _ = made
    out = tmp_path / "out"
    export_log(_log(root).slice(0, 10), out, _refusals(root)[:1])
    events: list[str] = []
    real_replace, real_sync = os.replace, sink_log.fsync_path

    def replace(src, dst):
        events.append(f"rename {os.path.basename(dst)}")
        return real_replace(src, dst)

    def sync(path):
        events.append("sync dir" if path == out else "sync file")
        return real_sync(path)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(sink_log, "fsync_path", sync)
    export_log(_log(root), out, _refusals(root))
    renames = [i for i, e in enumerate(events) if e.startswith("rename")]
    assert [events[i] for i in renames] == [f"rename {REFUSALS_FILE}", f"rename {LOG_FILE}"]
    assert events[renames[0] + 1] == "sync dir" and events[renames[1] + 1] == "sync dir", events
