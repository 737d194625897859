"""`coord bench machine`'s history rows on a small history: both paths answer alike, the
store takes the index for one key and for ten, the scan for a range whose keys outnumber
a quarter of the tail, and a row whose two paths disagree stops the benchmark."""

from __future__ import annotations

import pytest

from coord.bench import history_reads
from coord.sm import commands as c
from coord.sm.kv_index import HistoryIndex


def test_the_rows_on_a_small_history():
    r = history_reads.measure(2_000, keys=100)
    assert r["watch_one_key"]["returned"] == 10  # the first put, then every 200th
    assert r["range_ten_keys"]["returned"] == 10
    assert r["range_every_key"]["returned"] == 100
    assert [r[row]["path"] for row in ("watch_one_key", "range_ten_keys", "range_every_key")
            ] == ["index", "index", "index"]
    text = "\n".join(history_reads.lines(r))
    assert "2,000 revisions back" in text and "the store takes the index" in text


def test_a_range_of_many_keys_takes_the_scan():
    r = history_reads.measure(2_000, keys=1_000)  # 1,001 keys: 4 x 1,001 >= 2,000
    assert r["range_every_key"]["path"] == "scan"
    assert r["range_ten_keys"]["path"] == "index"


def test_paths_that_disagree_stop_the_row():
    m, back = history_reads.build(200, keys=10)
    history = m.kv.history
    keys = [e.kv.key for e in history.events]
    keys[keys.index(history_reads.WATCHED, len(keys) // 2)] = b"elsewhere"  # planted
    history.index = HistoryIndex(keys)
    with pytest.raises(RuntimeError, match="differently"):
        history_reads._both(m, c.EventsSince(back + 1, history_reads.WATCHED))
