"""A benchmark's --json output rendered as the manual's table (coord.bench.tables): the
same rows the benchmark prints, with the run's footer, and a clear error on an output
that is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coord.bench.tables import footer, from_dicts, markdown_page_table

RUN = {
    "benchmark": "own", "date": "2026-01-02T03:04:05Z",
    "machine": {"cpu": {"model": "Test CPU", "count": 2}, "memory_bytes": 8 << 30,
                "kernel": "6.1.0"},
    "coord": {"version": "0.1.0", "commit": "abc1234"},
    "load_start": [3.5, 2.0, 1.0], "load_end": [4.25, 2.0, 1.0],
    "command": "coord bench own --resources 100 --json",
}
ROWS = [{"op": "own-batched", "resources": 100, "seconds": 0.0125, "claims_per_s": 8000.0},
        {"op": "own-single", "resources": 100, "clients": 16, "seconds": 0.5,
         "claims_per_s": 200.0, "p50_ms": 1.234, "p99_ms": 9.876}]


def test_the_manual_table_is_the_printed_table_with_the_run_footer():
    page = markdown_page_table({"run": RUN, "rows": ROWS})
    lines = page.splitlines()
    assert lines[0] == ("| op | resources | seconds | claims_per_s | clients | p50_ms "
                        "| p99_ms |")
    assert lines[1] == "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    assert lines[2] == "| own-batched | 100 | 0.01 | 8,000 |  |  |  |"
    assert lines[3] == "| own-single | 100 | 0.50 | 200 | 16 | 1.23 | 9.88 |"
    assert lines[-1] == ("`coord bench own --resources 100 --json`, 2026-01-02T03:04:05Z, on "
                         "2 × Test CPU, 8.0 GiB, Linux 6.1.0; coord 0.1.0 at abc1234")
    printed = from_dicts(ROWS).text()
    assert printed[0].split() == lines[0].strip("| ").split(" | ")
    assert printed[2].split() == ["own-single", "100", "0.50", "200", "16", "1.23", "9.88"]


@pytest.mark.parametrize("output", [
    [], {"rows": ROWS}, {"run": {**RUN, "benchmark": "nosuch"}, "rows": ROWS},
    {"run": RUN}, {"run": {**RUN, "machine": {}}, "rows": ROWS},
])
def test_an_output_that_is_not_a_benchmarks_is_refused(output):
    with pytest.raises(ValueError):
        markdown_page_table(output)



def test_a_figure_of_another_shape_is_a_note_below_the_table():
    """coord bench raft: a row per level of clients, the failover below them."""
    figures = {"run": {**RUN, "benchmark": "raft"},
               "throughput": [{"concurrency": 1, "per_s": 812.5, "p50_ms": 1.2, "p99_ms": 3.4},
                              {"concurrency": 16, "per_s": 4000.0, "p50_ms": 3.9,
                               "p99_ms": 12.0}],
               "failover_s": {"trials": 2, "median": 0.65, "max": 0.7, "all": [0.6, 0.7]}}
    page = markdown_page_table(figures).split("\n\n")
    assert page[0].splitlines()[2:] == ["| 1 | 812 | 1.20 | 3.40 |",
                                        "| 16 | 4,000 | 3.90 | 12.00 |"]
    assert page[1] == ("failover after kill -9 of the leader: median 0.650 s, max 0.700 s "
                       "over 2 trials")


def test_the_startup_table_gives_each_median_beside_etcds():
    rows = [{"system": "coord", "trials": 2, "median_ms": 300.0, "max_ms": 400.0,
             "min_ms": 250.0},
            {"system": "etcd", "trials": 2, "median_ms": 600.0, "max_ms": 900.0,
             "min_ms": 120.0}]
    page = markdown_page_table({"run": {**RUN, "benchmark": "startup"}, "rows": rows})
    assert page.splitlines()[2:4] == ["| coord | 300 | 250 | 400 | 0.50 |",
                                      "| etcd | 600 | 120 | 900 | 1.00 |"]


def test_the_machine_table_gives_a_row_per_step_of_the_own():
    figures = {"run": {**RUN, "benchmark": "machine"}, "decode_ms": 1.5, "apply_ms": 20.25,
               "encode_result_ms": 2.0, "result_bytes": 1234, "whole_apply_ms": 30.0,
               "payload_bytes": 5678, "history_reads": None}
    lines = markdown_page_table(figures).splitlines()
    assert lines[0] == "| own() of 10,000 resources | ms | bytes |"
    assert lines[2:6] == ["| decode the command | 1.50 | 5,678 |", "| apply: own() | 20.25 |  |",
                          "| encode the result | 2.00 | 1,234 |",
                          "| the whole apply() | 30.00 |  |"]


DATA = Path(__file__).resolve().parents[2] / "docs" / "manual" / "benchmarks"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_each_data_file_of_the_manual_renders_and_names_its_run(path: Path):
    """Every --json output kept for the manual renders through its benchmark's table
    code, and its footer names the command, date and commit it came from."""
    output = json.loads(path.read_text())
    page = markdown_page_table(output)
    run = output["run"]
    assert page.startswith("|") or page.startswith("**")
    assert page.rstrip().endswith(footer(run))
    assert run["command"].startswith(f"coord bench {run['benchmark']}")
    assert run["command"] in page and run["date"] in page and run["coord"]["commit"] in page


def _etcd_row(system: str, api: str, per_s: float, variant: str = "plain") -> dict:
    return {"system": system, "api": api, "op": "put", "clients": 1, "per_s": per_s,
            "p50_ms": 1.5, "p99_ms": 3.0, "variant": variant}


def test_the_etcd_tables_come_from_its_rows_each_variant_beside_plaintext():
    """coord bench etcd: coord beside etcd, the TLS variant beside plaintext (its title
    says which), then the round table (no metered rows here: no rows, its legend)."""
    rows = [_etcd_row("etcd", "etcd", 2000.0), _etcd_row("coord", "etcd", 1000.0),
            _etcd_row("coord", "etcd", 500.0, "tls"), _etcd_row("floor", "etcd", 4000.0)]
    parts = markdown_page_table({"run": {**RUN, "benchmark": "etcd"}, "rows": rows})
    assert "| put | etcd | 1 | 1,000 | 1.50 | 3.00 | 2,000 | 1.50 | 3.00 | 0.50 |" in parts
    assert "| put | floor | 1 | 4,000 | 1.50 | 3.00 | 2,000 | 1.50 | 3.00 | 2.00 |" in parts
    assert "**coord plaintext beside TLS (mTLS on both ports), the same run:**" in parts
    assert "| put | etcd | 1 | 1,000 | 1.50 | 500 | 1.50 | 0.50 |" in parts
    assert "turns: coord: the Raft driver's wake-ups" in parts


def test_the_scale_tables_are_one_per_phase_that_ran():
    keys = {"system": "coord", "keys": 1000, "load_per_s": 500.0, "rss_max": 50 << 20,
            "disk_max": 1 << 20, "bytes_per_key": 2675.4, "put_p50_ms": 1.0,
            "put_p99_ms": 4.0, "get_p50_ms": 0.5, "get_p99_ms": 2.0, "errors": 0,
            "snapshot_s": None}
    page = markdown_page_table({"run": {**RUN, "benchmark": "scale"}, "soak": [],
                                "keys": [keys], "restart": []})
    assert page.count("**") == 2 and "**keys: a growing key space, at each decade**" in page
    assert "| coord | 1,000 | 500 | 50.0 | 2,675 | 1.0 | 1.00/4.00 | 0.50/2.00 | 0 | - |" in page


def test_the_snapshot_audit_and_tui_tables_come_from_their_figures():
    snapshot = {"keys": 10000, "random_values": False, "snapshot_bytes": 1 << 20,
                "installs": 1, "install_s": 0.5, "catchup_s": 1.25,
                "follower_peak_rss": 80 << 20, "follower_steady_rss": 64 << 20, "ratio": 1.25,
                "kept_follower_rss": 60 << 20, "ratio_to_kept": 1.33,
                "leader_rss_before": 70 << 20, "leader_rss_max_during": 72 << 20}
    page = markdown_page_table({"run": {**RUN, "benchmark": "snapshot"}, **snapshot})
    assert ("| 10,000 | repeated | 1.0 | 1 | 0.50 | 1.25 | 80.0 | 64.0 | 1.25 | 60.0 | 1.33 "
            "| 70.0/72.0 |") in page
    audit = {"synth_1000": {"commands": 1000, "rows": 1990, "seconds": 0.5,
                            "rows_per_s": 3980, "memory": {"peak_mib": {"driver_py": 120.0}}},
             "audit_1000_local[2]": {"master": "local[2]", "session_start_s": 3.9,
                                     "rows": 1990, "seconds": 20.3, "rows_per_s": 98,
                                     "checks_s": {"log.gap_free": 1.7,
                                                  "revisions.monotone": 3.2},
                                     "violations": 0, "memory": {"peak_mib": {"jvm": 931.0}}}}
    page = markdown_page_table({"run": {**RUN, "benchmark": "audit"}, **audit})
    assert "| synth 1,000 commands | 1,990 | 0.50 | 3,980 |  | driver_py 120 |" in page
    assert ("| audit 1,000, local[2] | 1,990 | 20.3 (+3.9 start) | 98 | monotone 3.2, "
            "gap_free 1.7 | jvm 931 |") in page
    timed = {"synth_1000": {**audit["synth_1000"], "rows_per_cpu_s": 7960}}
    page = markdown_page_table({"run": {**RUN, "benchmark": "audit"}, **timed})
    assert "| synth 1,000 commands | 1,990 | 0.50 | 3,980 (7,960/cpu-s) |  |" in page
    page = markdown_page_table({"run": {**RUN, "benchmark": "tui"}, "load_s": 2.25,
                                "idle_cpu_pct": 0.5})
    assert "| all owners on screen | 2.2 | s |" in page
    assert "| the console's CPU, idle | 0.5 | % of a core |" in page
