"""A benchmark's --json output rendered as the manual's table (coord.bench.tables): the
same rows the benchmark prints, with the run's footer, and a clear error on an output
that is not one."""

from __future__ import annotations

import pytest

from coord.bench.tables import from_dicts, markdown_page_table

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
