"""`coord bench audit --masters`: a local-cluster master's own commas do not split it;
the table has a row for each phase a run measured, the sink log's included (the full
runs are `make bench-audit` and `make bench-audit-sink`)."""

from __future__ import annotations

from coord.bench.audit import masters, table


def test_masters_split_on_the_commas_outside_brackets():
    assert masters("local[2],local-cluster[2,1,1024]") == ["local[2]", "local-cluster[2,1,1024]"]
    assert masters("local-cluster[2,1,1024]") == ["local-cluster[2,1,1024]"]
    assert masters("spark://127.0.0.1:7077,local[*]") == ["spark://127.0.0.1:7077", "local[*]"]


def test_the_sink_log_phases_get_their_rows_and_notes():
    made = {"sink_rows": 1_000_050, "rows": 310_000, "entries": 120_000, "seconds": 50.0,
            "sink_rows_per_s": 20_001, "sink_rows_per_cpu_s": 25_000, "published": 90,
            "attempts": 1_400, "retries": 40, "speculative_losers": 30, "restarts": 5,
            "refusals": 45, "memory": {"peak_mib": {"driver_py": 180.0}}}
    audited = {"master": "local[2]", "session_start_s": 3.0, "rows": 310_000,
               "seconds": 80.0, "rows_per_s": 3_875, "load_s": 1.0,
               "checks_s": {"sink.sequences": 9.0, "log.gap_free": 4.0},
               "violations": 0, "memory": {}, "sink_rows": 1_000_050, "sink_seconds": 40.0,
               "sink_rows_per_s": 12_500, "sink_check_rows_per_s": 25_001}
    t = table({"sink_synth_1000000": made, "sink_audit_1000000_local[2]": audited})
    assert [r[0] for r in t.rows] == ["synth sink log 1,000,050 rows",
                                      "audit with sink log 1,000,050, local[2]"]
    assert t.rows[0][3] == "20,001 (25,000/cpu-s)" and t.rows[0][5] == "driver_py 180"
    assert t.rows[1][3] == "12,500" and t.rows[1][4].startswith("sequences 9.0")
    assert any("45 writes refused" in n for n in t.notes)
    assert any("took 40.0 s of 80.0 s (25,001 sink rows/s)" in n for n in t.notes)
