"""`coord bench machine`'s history rows: a watch's start and a read at a past revision,
far back in a long history, by the per-key index (`coord.sm.kv_index`) and by a scan of
the history's tail, timed in the same run on the same state machine (the store's
`scan_factor` picks the path; the answers are checked equal).

The history: `keys` keys (`k/000000`...) created, then `revisions` puts cycling over
them, of which the first and every tenth of the rest go to one more key (`watched`).
The watch starts on `watched` and the reads are at the revision before those puts:
`revisions` back."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from coord.sm import commands as c
from coord.sm.kv_history import ALL_KEYS
from coord.sm.machine import CoordMachine

KEYS = 100_000
WATCHED = b"watched"
NARROW = (b"k/00000", b"k/00001")  # ten keys
_ALWAYS_SCAN = 2**62
_TRIALS = 3


def build(revisions: int, keys: int = KEYS) -> tuple[CoordMachine, int]:
    """The machine, and the revision `revisions` back from its head (one put a revision)."""
    m = CoordMachine()
    kv = m.kv
    value = b"v" * 16
    every = max(1, revisions // 10)
    for i in range(keys + revisions):
        if i < keys:
            key = b"k/%06d" % i
        elif (i - keys) % every == 0:
            key = WATCHED
        else:
            key = b"k/%06d" % (i % keys)
        kv.put(key, value)
        if i % 10_000 == 0:
            m.drain_events()  # no watcher takes them here
    m.drain_events()
    return m, m.revision - revisions


def _median_s(fn: Callable[[], Any]) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(_TRIALS):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _both(m: CoordMachine, cmd: c.EventsSince | c.Range) -> dict[str, Any]:
    """`cmd` by the index and by a scan (seconds, median of a few), the path the store
    takes by itself, and how much it returned."""
    history = m.kv.history
    own = history.scan_factor
    answers, row = [], {}
    try:
        for path, factor in (("index", 0), ("scan", _ALWAYS_SCAN)):
            history.scan_factor = factor
            row[f"{path}_s"], answer = _median_s(lambda: m.execute(cmd))
            answers.append(answer)
    finally:
        history.scan_factor = own
    if answers[0] != answers[1] or answers[0].error:
        raise RuntimeError(f"the index and the scan answer {cmd!r:.80} differently")
    revision = cmd.revision if isinstance(cmd, c.EventsSince) else cmd.revision + 1
    row["path"] = "index" if history.reads_by_index(revision, cmd.key, cmd.range_end) else "scan"
    row["returned"] = (len(answers[0].events) if isinstance(cmd, c.EventsSince)
                       else answers[0].count)
    return row


def measure(revisions: int, keys: int = KEYS) -> dict[str, Any]:
    t0 = time.perf_counter()
    m, back = build(revisions, keys)
    built_s = time.perf_counter() - t0
    return {
        "revisions": revisions, "keys": keys + 1, "build_s": built_s,
        "watch_one_key": _both(m, c.EventsSince(back + 1, WATCHED)),
        "range_ten_keys": _both(m, c.Range(*NARROW, revision=back)),
        "range_every_key": _both(m, c.Range(b"k/", ALL_KEYS, limit=1, revision=back)),
    }


def lines(r: dict[str, Any]) -> list[str]:
    """The rows as printed: the store's own path beside the scan, and their ratio."""
    out = [f"history reads {r['revisions']:,} revisions back (a history of "
           f"{r['revisions'] + r['keys'] - 1:,} puts on {r['keys']:,} keys, built in "
           f"{r['build_s']:.1f} s):"]
    for name, about in (("watch_one_key", "watch start on one key"),
                        ("range_ten_keys", "range of ten keys"),
                        ("range_every_key", "range of every key (limit 1)")):
        row = r[name]
        ratio = row["scan_s"] / row["index_s"]
        out.append(f"  {about}: index {1e3 * row['index_s']:.3f} ms, scan "
                   f"{1e3 * row['scan_s']:.1f} ms (scan/index {ratio:,.1f}x); "
                   f"{row['returned']:,} returned; the store takes the {row['path']}")
    return out
