"""coord bench spark's tables come from its --json figures: a row per sink and writer
(the foreachPartition baseline among them) with the fenced writer's ratio and the
duplicate rows a database write left, the many-partitions write, the fence's own cost,
and the rows left out as notes; the manual's page names the run."""

from __future__ import annotations

from coord.bench.tables import footer, markdown_page_table, printed
from tests.bench.test_bench_tables import RUN


def _median(rate: float) -> dict:
    return {"n": 2, "missing": 0, "median": rate, "max": rate}


FIGURES = {
    "rows": 100000, "partitions": 4, "runs": 2, "cost_partitions": 200,
    "notes": ["no postgres rows: no initdb"],
    "sqlite": {"plain": _median(50000.0), "fenced": _median(40000.0),
               "jdbc": _median(20000.0), "foreach": _median(80000.0),
               "fenced_over_plain": 0.8, "fenced_over_jdbc": 2.0, "fenced_over_foreach": 0.5,
               "duplicates": {"plain": 0, "fenced": 0, "jdbc": 0, "foreach": 3}},
    "parquet": {"plain": _median(90000.0), "fenced": _median(45000.0),
                "fenced_over_plain": 0.5},
    "fence_cost": {"claim": {"p50_ms": 4.25, "p99_ms": 12.5},
                   "commit_check": {"p50_ms": 1.5, "p99_ms": 3.75},
                   "claim_calls": {"calls": 4, "waits": 4, "beside": 0, "kept_alive": 1}},
    "many_partitions": {"partitions": 1000, "plain_rows_s": 30000.0,
                        "fenced_rows_s": 15000.0, "fenced_over_plain": 0.5},
}


def test_the_spark_tables_come_from_its_figures_and_name_the_run():
    page = markdown_page_table({"run": {**RUN, "benchmark": "spark",
                                        "command": "coord bench spark --runs 2"}, **FIGURES})
    rows = [line for line in page.splitlines()
            if line.startswith("| ") and not line.startswith("| ---")]
    assert rows[:10] == [
        "| sink | partitions | writer | rows/s | fenced/writer | duplicate rows |",
        "| sqlite | 4 | plain | 50,000 | 0.80 | 0 |",
        "| sqlite | 4 | fenced | 40,000 |  | 0 |",
        "| sqlite | 4 | jdbc | 20,000 | 2.00 | 0 |",
        "| sqlite | 4 | foreach | 80,000 | 0.50 | 3 |",
        "| parquet | 4 | plain | 90,000 | 0.50 |  |",
        "| parquet | 4 | fenced | 45,000 |  |  |",
        "| sqlite | 1,000 | plain | 30,000 | 0.50 |  |",
        "| sqlite | 1,000 | fenced | 15,000 |  |  |",
        "| per partition | p50 ms | p99 ms |",
    ]
    assert rows[10:] == ["| claim | 4.25 | 12.50 |", "| commit check | 1.50 | 3.75 |"]
    assert "no postgres rows: no initdb" in page
    assert "200 sequential claims" in page
    assert page.rstrip().endswith(footer({**RUN, "command": "coord bench spark --runs 2"}))
    assert "coord bench spark --runs 2" in page


def test_the_printed_spark_tables_are_the_same_tables_as_text():
    """What `coord bench spark` prints without --json: the same rows, titles and notes."""
    from coord.bench.spark_writer import table

    lines = printed(table(FIGURES)).splitlines()
    assert [line.split() for line in lines[:2]] == [
        "100,000 rows a write; rows/s: the median of 2 runs (one run with many "
        "partitions)".split(), "sink partitions writer rows/s fenced/writer duplicate rows".split()]
    assert "sqlite 4 foreach 80,000 0.50 3".split() in [line.split() for line in lines]
    assert "note: no postgres rows: no initdb" in lines
    assert "claim 4.25 12.50".split() == lines[-3].split()
    assert lines[-1] == "a claim: 4 requests to coord, 4 waits for them in a row"


def test_figures_from_before_the_claim_was_counted_still_make_the_tables():
    from coord.bench.spark_writer import table

    cost = {k: v for k, v in FIGURES["fence_cost"].items() if k != "claim_calls"}
    assert not table({**FIGURES, "fence_cost": cost})[1].notes
