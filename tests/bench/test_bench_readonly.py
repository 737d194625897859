"""The pure parts of `coord bench readonly`: statistics, the table, and reading the
members' own switch times out of their logs. No processes, no timing asserts."""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import datetime

from coord.bench.readonly import METRICS, render_table, table
from coord.bench.readonly_trials import Trial, clock_to_epoch, coord_switch_time, zk_switch_time
from coord.bench.stats import ratio, summarize


def test_summarize_counts_missing_trials_and_ignores_them_for_median_and_max():
    assert summarize([3.0, None, 1.0, 2.0]) == {"n": 3, "missing": 1, "median": 2.0, "max": 3.0}
    assert summarize([1.0, 4.0]) == {"n": 2, "missing": 0, "median": 2.5, "max": 4.0}
    assert summarize([None]) == {"n": 0, "missing": 1, "median": None, "max": None}


def test_ratio_only_for_positive_durations():
    assert ratio(50.0, 200.0) == 0.25
    assert ratio(None, 1.0) is None and ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None and ratio(-5.0, 2.0) is None


def _trial(system: str, role: str, i: int, value: float | None) -> Trial:
    return Trial(system, role, i, "n1", {m.key: value for m in METRICS})


def test_table_has_a_row_per_metric_and_role_with_both_systems_and_the_ratio():
    trials = [_trial("coord", r, i, 100.0 * i) for r in ("leader", "follower") for i in (1, 2, 3)]
    trials += [_trial("zk", r, i, 400.0 * i) for r in ("leader", "follower") for i in (1, 2)]
    trials.append(_trial("zk", "follower", 3, None))
    made = render_table(trials, {"election": 1200.0, "100": 100.0, "1000": 1000.0},
                        ["coord", "zk"])
    assert len(made.rows) == 2 * len(METRICS)
    first = made.rows[0]  # follower rows come first
    assert first[:3] == [METRICS[0].label, "follower", "<=1200"]
    assert first[3] == "200 / 300 (3)"  # coord: median 200, max 300, n 3
    assert first[4] == "600 / 800 (2+1?)"  # zk: one trial missing, shown as such
    assert first[5] == "0.33"  # 200 / 600
    assert {"<=100", "<=1000"} <= {row[2] for row in made.rows}


def test_table_for_one_system_has_no_ratio_column():
    made = render_table([_trial("coord", "follower", 1, 5.0)], {}, ["coord"])
    assert made.headers == ["metric (ms)", "survivor", "target", "coord median/max (n)"]


def test_the_json_outputs_trials_give_the_printed_table():
    """The manual renders the table from --json's trials and config: the same rows, the
    election target from coord's tick and election ticks."""
    trials = [_trial("coord", "leader", i, 10.0 * i) for i in (1, 2)]
    config = {"coord": {"tick_ms": 50, "election_ticks": 12}}
    made = table({"config": config, "trials": [asdict(t) for t in trials]})
    assert made == render_table(trials, {"election": 1200.0, "100": 100.0, "1000": 1000.0},
                                ["coord"])
    assert made.rows[0][2] == "<=1200"


def test_coord_switch_time_is_the_members_first_logged_switch_to_that_mode():
    ref = datetime(2025, 3, 1, 12, 0, 0).timestamp()
    log = "\n".join([
        "11:59:59.000 INFO  n1: something else",
        "12:00:00.400 WARNING n2: read-write -> read-only (term 3, revision 9, ...)",
        "12:00:00.850 WARNING n1: read-write -> read-only (term 3, revision 9, ...)",
        "12:00:02.000 WARNING n1: read-only -> read-write (term 4, revision 9, ...)",
    ])
    assert abs(coord_switch_time(log, "n1", "read-only", ref) - (ref + 0.85)) < 1e-6
    assert abs(coord_switch_time(log, "n1", "read-write", ref) - (ref + 2.0)) < 1e-6
    assert coord_switch_time(log, "n3", "read-only", ref) is None


def test_clock_to_epoch_picks_the_day_nearest_the_reference():
    ref = datetime(2025, 3, 1, 23, 59, 59).timestamp()
    after_midnight = clock_to_epoch(0, 0, 1, 500, ref)
    assert abs(after_midnight - ref - 2.5) < 1e-6
    ref2 = datetime(2025, 3, 2, 0, 0, 1).timestamp()
    before_midnight = clock_to_epoch(23, 59, 59, 0, ref2)
    assert abs(ref2 - before_midnight - 2.0) < 1e-6


def test_zk_switch_time_reads_log4j_iso8601():
    log = (
        "2025-03-01 12:00:00,100 [myid:1] - INFO  [QuorumPeer:...] - LOOKING\n"
        "2025-03-01 12:00:02,123 [myid:1] - INFO  [Thread-2:...] - Read-only server started\n"
    )
    expected = time.mktime(time.strptime("2025-03-01 12:00:02", "%Y-%m-%d %H:%M:%S")) + 0.123
    assert abs(zk_switch_time(log) - expected) < 1e-6
    assert zk_switch_time("nothing here\n") is None
