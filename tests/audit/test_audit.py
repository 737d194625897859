"""The PySpark audit on real histories: a clean synthesized one passes every check, and
one with a violation planted per check fails each of them, citing the planted rows.
Two audits in all, on a few thousand rows, in the one shared local[2] session."""

from __future__ import annotations

import json

import pytest

from coord.audit.checks import CHECKS, log
from coord.audit.job import run_audit
from coord.history.schema import ADMIN_CHANGE_KINDS, AUTH_CHANGE_KINDS
from coord.history.sink import HistorySink
from coord.history.synth import synthesize
from tests.audit.plants import plant_all

# The JVM's start and first jobs take ~1 min on a 2-core box shared by many (load 25);
# the module's fixtures run inside its first test's time limit.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

SYNTH = 3_000


@pytest.fixture(scope="module")
def clean(tmp_path_factory, spark):
    out = tmp_path_factory.mktemp("clean") / "h"
    HistorySink(out).write(synthesize(SYNTH, seed=5))
    report = out.parent / "report"
    return run_audit(spark, out, report_dir=report, combined=True), report


@pytest.fixture(scope="module")
def planted_history(tmp_path_factory):
    rows, at = plant_all(list(synthesize(SYNTH, seed=5)))
    out = tmp_path_factory.mktemp("planted") / "h"
    with HistorySink(out, "jsonl") as sink:  # the JSONL reader, while we are at it
        # as an export whose last pages came from a member without a quorum leaves it
        sink.note_read_only({"member": "n3", "pages": 2, "quorum_lost_ms": 900,
                             "commit_index": rows[-1]["index"]})
        sink.write(rows)
    return out, at


@pytest.fixture(scope="module")
def planted(planted_history, spark):
    out, at = planted_history
    return run_audit(spark, out, with_stats=False, combined=True), at


def test_a_clean_history_passes_every_check_and_gets_a_report(clean):
    result, report = clean
    assert result.violations == 0, result.examples
    assert result.summary["read_only"] is None  # its tail was not served read-only
    assert set(result.summary["checks"]) == set(CHECKS)
    o = result.summary["overview"]
    assert o["last_index"] == SYNTH and o["first_index"] == 1 and o["grants"] > 100
    tenure = result.summary["stats"]["tenure"]
    assert tenure["count"] > 100 and 0 < tenure["percentiles_ms"]["p50"] <= tenure["max_ms"]
    assert result.summary["stats"]["takeover"]["count"] > 0
    terms = result.summary["stats"]["timeline"]["terms"]  # [term, start, leader]
    assert [t[2] for t in terms if t[2]][0] == "n1" and len(terms) == o["terms"]
    for png in ("tenure.png", "takeover.png", "timeline.png", "ops_rate.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (report / "index.html").read_text()
    assert "coord audit: passed" in page
    # the trail: every admin change of the synthesized history (it makes no auth change)
    made: dict[str, int] = {}
    for row in synthesize(SYNTH, seed=5):
        if row["seq"] == 0 and row["kind"] in AUTH_CHANGE_KINDS + ADMIN_CHANGE_KINDS:
            made[row["kind"]] = made.get(row["kind"], 0) + 1
    trail = result.summary["changes"]
    assert trail["by_kind"] == made and trail["count"] == sum(made.values()) > 0
    assert f"<h2>Auth and admin changes ({trail['count']}; first {trail['count']} listed)" \
        "</h2>" in page
    assert json.loads((report / "summary.json").read_text())["violations"] == 0


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_every_check_catches_its_planted_violation(planted, check):
    result, at = planted
    assert result.count(check) >= 1, f"{check} missed its plant at index {at[check]}"
    mine = [v for v in result.examples if v["check"] == check]
    assert any(v["index"] == at[check] for v in mine), mine
    assert all(v["evidence"] and v["detail"] for v in mine)


def test_a_history_that_ends_read_only_says_so(planted):
    result, _ = planted
    assert result.summary["read_only"]["member"] == "n3"


def test_the_log_checks_cite_the_same_rows_when_too_many_to_broadcast(
        planted_history, planted, spark, monkeypatch):
    """Past BROADCAST_STEPS_MAX bad steps the log checks join their rows back by a
    shuffle: the same violations, citing the same rows, as by the broadcast."""
    monkeypatch.setattr(log, "BROADCAST_STEPS_MAX", 0)
    names = ["revisions.monotone", "log.gap_free"]
    result = run_audit(spark, planted_history[0], checks=names, with_stats=False)
    by_broadcast, _ = planted
    for name in names:
        assert result.count(name) == by_broadcast.count(name) >= 1
    assert (sorted(map(str, result.examples))
            == sorted(str(v) for v in by_broadcast.examples if v["check"] in names))
