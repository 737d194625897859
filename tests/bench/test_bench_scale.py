"""`coord bench scale`: its tables pair coord with etcd (planted rows), and a short run
on a real cluster prints every figure (the full run is `make bench-scale`)."""

from __future__ import annotations

import json
import subprocess
import sys

from coord.bench.scale import decades, keys_table, soak_table


def _keys_row(system: str, keys: int, per_key: float, p99: float) -> dict:
    return {"system": system, "keys": keys, "load_per_s": 100.0, "rss_max": 50 << 20,
            "disk_max": 1 << 20, "bytes_per_key": per_key, "put_p50_ms": 1.0,
            "put_p99_ms": p99, "get_p50_ms": 1.0, "get_p99_ms": 2.0}


def test_tables_pair_coord_with_etcd_and_show_the_soak_spread():
    lines = keys_table([_keys_row("coord", 1000, 300.0, 4.0), _keys_row("etcd", 1000, 100.0,
                                                                       2.0)])
    assert lines[-1] == "at 1000 keys coord/etcd: RSS per key 3.00x, put p99 2.00x"
    soak = [{"system": "coord", "t_s": float(t), "puts": t * 10, "errors": 0,
             "rss": {"n1": rss}, "disk": {"n1": 1}, "rss_max": rss}
            for t, rss in ((1, 100 << 20), (2, 100 << 20), (3, 110 << 20))]
    assert soak_table(soak)[-1].endswith("(+10.0%)")
    assert decades(25_000) == [1000, 10_000, 25_000] and decades(1000) == [1000]


def test_a_short_run_prints_every_figure():
    out = subprocess.run(
        [sys.executable, "-m", "coord", "bench", "scale", "--no-etcd", "--members", "1",
         "--seconds", "2",
         "--sample-s", "1", "--keys", "1500", "--probe-ops", "50", "--concurrency", "4",
         "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["keys"] for r in result["keys"]] == [1000, 1500]
    assert all(r["rss_max"] > 0 and r["disk_max"] > 0 and r["put_p99_ms"] > 0
               for r in result["keys"])
    assert result["soak"] and result["soak"][-1]["puts"] > 0
    assert all(len(r["rss"]) == 1 for r in result["soak"])
