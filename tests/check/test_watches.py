"""The watch checkers (etcd's robustness watch guarantees): a clean hand-made history
passes every one, and each catches a planted violation of its own guarantee."""

from __future__ import annotations

from typing import Any

import pytest

from coord.check import CHECKERS, check_all
from coord.check.oplog import OplogError, pair
from coord.check.watch_coverage import check_watch_reliable, check_watch_resumable
from coord.check.watch_history import check_watch_history
from coord.check.watch_prev_kv import check_watch_prev_kv
from coord.check.watches import (
    check_watch_atomic,
    check_watch_filters,
    check_watch_ordered,
    check_watch_unique,
)
from tests.check.oplogs import H

WATCH_CHECKS = ["watch-ordered", "watch-unique", "watch-atomic", "watch-reliable",
                "watch-resumable", "watch-prev-kv", "watch-filters", "watch-history"]
PREFIX = "w/"
END = 400  # when the watches that did not break were canceled


def put(key: str, value: Any, rev: int, **prev: Any) -> dict[str, Any]:
    return {"type": "put", "key": PREFIX + key, "value": value, "revision": rev, **prev}


def delete(key: str, rev: int, **prev: Any) -> dict[str, Any]:
    return {"type": "delete", "key": PREFIX + key, "value": None, "revision": rev, **prev}


def watch(h: H, process: int, watcher: str, start_rev: int, t0: int,
          responses: list[tuple[int, list[dict]]], end: int, status: str = "ok",
          compacted: int | None = None, **opts: Any) -> None:
    """A watch op: its invoke at t0, a response row per (time, events), its completion."""
    base = {"process": process, "f": "watch", "key": PREFIX, "range_end": "w0",
            "watcher": watcher, "start_revision": start_rev, "prev_kv": False,
            "filters": [], "error": None, **opts}
    h.rows.append({**base, "index": len(h.rows), "type": "invoke", "value": None,
                   "time_ns": t0})
    for t, events in responses:
        h.rows.append({**base, "index": len(h.rows), "type": "response", "value": events,
                       "revision": events[-1]["revision"], "time_ns": t})
    h.rows.append({**base, "index": len(h.rows), "type": status, "value": None,
                   "time_ns": end, "error": None if status == "ok" else "UNAVAILABLE",
                   "compacted": compacted})


def _writes(h: H) -> None:
    h.op(0, "write", 10, 20, 1, key="w/a", revision=2)
    h.op(0, "write", 30, 40, 2, key="w/b", revision=3)
    h.op(0, "write", 50, 60, 3, key="w/a", revision=4)
    h.op(0, "write", 70, 80, None, key="w/b", revision=5)  # a delete
    h.op(0, "cas", 90, 100, [3, 4], key="w/a")  # a txn: its answer has no revision
    h.op(1, "txn_put", 110, 120, [["w/c", 5], ["w/d", 6]])  # one revision, two events
    h.op(0, "cas", 130, 140, [4, 9], key="w/a", status="fail")  # the compare failed


def clean(a2: list | None = None, c: list | None = None, b: list | None = None) -> H:
    """Three watchers from revision 2: A (prev_kv) breaks after revision 3 and resumes
    from 4; B filters puts out; C sees everything, several revisions per response."""
    h = H(key=None)
    _writes(h)
    watch(h, 10, "A", 2, 5, [(25, [put("a", 1, 2)]), (45, [put("b", 2, 3, prev=None)])],
          46, status="info", prev_kv=True)
    watch(h, 11, "A", 4, 47, a2 if a2 is not None else [
        (65, [put("a", 3, 4, prev=1)]), (85, [delete("b", 5, prev=2)]),
        (105, [put("a", 4, 6, prev=3)]),
        (125, [put("c", 5, 7, prev=None), put("d", 6, 7, prev=None)])], END, prev_kv=True)
    watch(h, 12, "B", 2, 5, b if b is not None else [(85, [delete("b", 5)])], END,
          filters=["noput"])
    watch(h, 13, "C", 2, 5, c if c is not None else [
        (65, [put("a", 1, 2), put("b", 2, 3), put("a", 3, 4)]),
        (125, [delete("b", 5), put("a", 4, 6), put("c", 5, 7), put("d", 6, 7)])], END)
    return h


def _c(*responses: list[dict]) -> list[tuple[int, list[dict]]]:
    """C's responses, one per list, all arriving once every write was sent."""
    return [(125 + i, events) for i, events in enumerate(responses)]


C_FIRST = [put("a", 1, 2), put("b", 2, 3), put("a", 3, 4)]
C_LAST = [delete("b", 5), put("a", 4, 6), put("c", 5, 7), put("d", 6, 7)]


def _messages(result) -> list[str]:
    return [v["message"] for v in result.violations]


def test_a_clean_watch_history_passes_every_watch_check():
    results = check_all(clean().sorted())
    watch_results = [r for r in results if r.checker.startswith("watch-")]
    assert [r.checker for r in watch_results] == WATCH_CHECKS
    assert all(r.ok for r in watch_results), [(r.checker, _messages(r)) for r in results]
    assert all(r.stats["watches"] == 4 and r.stats["events"] == 15 for r in watch_results)


def test_the_registry_names_every_watch_check():
    assert [n for n in CHECKERS if n.startswith("watch-")] == WATCH_CHECKS
    assert all(CHECKERS[n][0] == ("watch",) for n in WATCH_CHECKS)


def test_watches_that_delivered_nothing_are_unknown_not_ok():
    h = H(key=None)
    watch(h, 1, "A", 2, 5, [], 10)
    assert check_watch_reliable(h.sorted()).verdict == "unknown"


def test_ordered_catches_a_revision_going_back_and_a_txn_out_of_order():
    r = check_watch_ordered(clean(c=_c([put("b", 2, 3), put("a", 1, 2), put("a", 3, 4)],
                                       C_LAST)).sorted())
    assert "revision 2 came after 3" in _messages(r)[0]
    r = check_watch_ordered(clean(c=_c(C_FIRST, [delete("b", 5), put("a", 4, 6),
                                                 put("d", 6, 7), put("c", 5, 7)])).sorted())
    assert r.count == 1 and "revision 7's events came as ['w/c', 'w/d'], to another watch " \
        "as ['w/d', 'w/c']" in _messages(r)[0]


def test_unique_catches_an_event_delivered_twice():
    r = check_watch_unique(clean(c=_c(C_FIRST + [put("a", 3, 4)], C_LAST)).sorted())
    assert r.count == 1 and "put of 'w/a' at revision 4 delivered twice" in _messages(r)[0]


def test_atomic_catches_a_revision_split_across_responses_and_one_cut_short():
    r = check_watch_atomic(clean(c=_c(C_FIRST, C_LAST[:3], C_LAST[3:])).sorted())
    assert r.count == 1 and "revision 7 split across responses" in _messages(r)[0]
    r = check_watch_atomic(clean(c=_c(C_FIRST, C_LAST[:3])).sorted())
    assert r.count == 1 and "got part of revision 7, without ['w/d']" in _messages(r)[0]


def test_reliable_catches_a_missed_revision_and_an_acknowledged_write_never_seen():
    r = check_watch_reliable(clean(c=_c([put("a", 1, 2), put("a", 3, 4)], C_LAST)).sorted())
    assert r.count == 1 and "watch C" in _messages(r)[0] and \
        "missed revision 3 (put of 'w/b')" in _messages(r)[0]
    h = clean(c=_c(C_FIRST, C_LAST, [put("y", 43, 9)]))
    h.op(3, "write", 110, 120, 42, key="w/z", revision=8)  # nobody saw it
    h.op(3, "write", 121, 122, 43, key="w/y", revision=9)
    r = check_watch_reliable(h.sorted())
    assert r.count == 1 and "acknowledged put of 'w/z' at revision 8 never came" in \
        _messages(r)[0]


def test_reliable_excuses_what_the_server_said_was_compacted():
    h = clean(c=_c([put("a", 3, 4)], C_LAST))
    assert check_watch_reliable(h.sorted()).count == 2  # revisions 2 and 3 missed
    h.rows[-1]["compacted"] = 4
    assert check_watch_reliable(h.sorted()).ok


def test_reliable_owes_no_delete_a_compaction_at_the_watch_start_removed():
    """w/b deleted at 5, the history compacted at 5, then watch D from 5: etcd drops a
    compacted key's tombstone, so D is not owed that delete; a put at its start is."""
    h = clean()
    h.op(4, "compact", 141, 142, 5, key=None)
    watch(h, 14, "D", 5, 150, [(160, [put("a", 4, 6), put("c", 5, 7), put("d", 6, 7)])],
          END)
    assert check_watch_reliable(h.sorted()).ok
    h.rows = [r for r in h.rows if r["f"] != "compact"]  # no compaction: owed
    r = check_watch_reliable(h.sorted())
    assert r.count == 1 and "watch D" in _messages(r)[0] and \
        "missed revision 5 (delete of 'w/b')" in _messages(r)[0]


def test_resumable_catches_a_restart_that_repeats_and_one_that_skips():
    a2 = [(65, [put("b", 2, 3), put("a", 3, 4, prev=1)]), (85, [delete("b", 5, prev=2)]),
          (105, [put("a", 4, 6, prev=3)])]
    r = check_watch_resumable(clean(a2=a2).sorted())
    assert r.count == 1 and "delivered revision 3, before the revision it was started" \
        in _messages(r)[0]
    h = clean(a2=[(85, [delete("b", 5, prev=2)]), (105, [put("a", 4, 6, prev=3)])])
    for row in h.rows:
        if row.get("process") == 11:
            row["start_revision"] = 5  # A's restart skips revision 4
    r = check_watch_resumable(h.sorted())
    assert r.count == 1 and "restarted from 5, but the watch before it leaves off at 4" \
        in _messages(r)[0]
    assert r.stats["restarts"] == 1


def test_prev_kv_catches_a_wrong_prev_and_one_sent_unasked():
    a2 = [(65, [put("a", 3, 4, prev=9)]), (85, [delete("b", 5, prev=2)]),
          (105, [put("a", 4, 6, prev=3)])]
    r = check_watch_prev_kv(clean(a2=a2).sorted())
    assert r.count == 1 and "has prev '9', but revision 2 left '1'" in _messages(r)[0]
    r = check_watch_prev_kv(clean(b=[(85, [delete("b", 5, prev=2)])]).sorted())
    assert r.count == 1 and "prev_kv '2' sent unasked" in _messages(r)[0]


def test_filters_catch_a_filtered_event_and_a_key_outside_the_range():
    r = check_watch_filters(clean(b=[(85, [delete("b", 5)]), (105, [put("a", 4, 6)])]
                                  ).sorted())
    assert r.count == 1 and "a put at revision 6 came through its filter ['noput']" in \
        _messages(r)[0]
    outside = {"type": "put", "key": "x/a", "value": 1, "revision": 2}
    r = check_watch_filters(clean(c=_c([outside, *C_FIRST[1:]], C_LAST)).sorted())
    assert r.count == 1 and "'x/a' is outside the watched range" in _messages(r)[0]


def test_history_catches_events_nobody_wrote_and_watches_that_disagree():
    r = check_watch_history(clean(c=_c([put("a", 77, 2), *C_FIRST[1:]], C_LAST)).sorted())
    assert "watches disagree on revision 2" in _messages(r)[0]
    assert any("put of 'w/a' = '77' nobody sent" in m for m in _messages(r))
    # the failed cas's value, at a revision of its own
    r = check_watch_history(clean(c=_c(C_FIRST, C_LAST, [put("a", 9, 8)])).sorted())
    assert r.count == 1 and "whose write failed" in _messages(r)[0]
    # a put at another revision than its write's answer said
    r = check_watch_history(clean(c=_c(C_FIRST, C_LAST, [put("b", 2, 8)])).sorted())
    assert any("at revision 8, but its write's answer said revision 3" in m
               for m in _messages(r))


def test_history_catches_an_event_before_its_write_and_revisions_against_real_time():
    h = clean(c=[(65, C_FIRST), (125, C_LAST), (300, [put("p", 60, 8), put("q", 61, 9)])])
    h.op(3, "write", 200, 210, 60, key="w/p")
    h.op(3, "write", 220, 230, 61, key="w/q")
    assert check_watch_history(h.sorted()).ok
    h = clean(c=[(65, C_FIRST), (125, C_LAST), (300, [put("q", 61, 8), put("p", 60, 9)])])
    h.op(3, "write", 200, 210, 60, key="w/p")
    h.op(3, "write", 220, 230, 61, key="w/q")
    r = check_watch_history(h.sorted())
    assert r.count == 1 and "the write at revision 9 was acknowledged before the write at " \
        "an earlier revision was sent" in _messages(r)[0]
    h = clean(c=[(65, C_FIRST), (125, C_LAST), (205, [put("q", 61, 8)])])
    h.op(3, "write", 220, 230, 61, key="w/q")
    r = check_watch_history(h.sorted())
    assert r.count == 1 and "arrived before its write was sent" in _messages(r)[0]


def test_a_response_outside_its_watch_is_a_malformed_oplog():
    h = H(key=None)
    watch(h, 1, "A", 2, 5, [(25, [put("a", 1, 2)])], 20)  # answered after it ended
    with pytest.raises(OplogError, match="a response with no open stream on process 1"):
        pair(h.sorted())
    (a1,) = [op for op in pair(clean().sorted()) if op.process == 10]
    assert [r["value"] for r in a1.responses] == [[put("a", 1, 2)], [put("b", 2, 3, prev=None)]]


def _compacted_chain(third_start: int) -> H:
    """A watcher breaks after revision 3; its restart from 4 is refused (compacted at
    5); the next starts at `third_start`. Revision 5's delete carries no prev: the
    compaction took revision 4 (prev_kv needs the revision before)."""
    h = H(key=None)
    _writes(h)
    h.op(5, "compact", 60, 61, 5)
    watch(h, 10, "A", 2, 5, [(25, [put("a", 1, 2)]), (45, [put("b", 2, 3, prev=None)])],
          46, status="info", prev_kv=True)
    watch(h, 11, "A", 4, 62, [], 63, status="fail", compacted=5, prev_kv=True)
    third = [(85, [delete("b", 5, prev=None)]), (105, [put("a", 4, 6, prev=3)])]
    watch(h, 12, "A", third_start, 64, [(t, evs) for t, evs in third
                                        if evs[0]["revision"] >= third_start], END,
          prev_kv=True)
    return h


def test_a_chain_told_it_was_compacted_resumes_at_the_compaction():
    rows = _compacted_chain(5).sorted()
    assert all(r.ok for r in check_all(rows)), [(r.checker, r.verdict, _messages(r))
                                                for r in check_all(rows)]
    r = check_watch_resumable(_compacted_chain(6).sorted())
    assert r.count == 1 and "restarted from 6, but the watch before it leaves off at 5" \
        in _messages(r)[0]


def test_prev_kv_may_be_missing_only_where_a_compaction_explains_it():
    a2 = [(65, [put("a", 3, 4, prev=None)]), (85, [delete("b", 5, prev=2)]),
          (105, [put("a", 4, 6, prev=3)])]
    r = check_watch_prev_kv(clean(a2=a2).sorted())
    assert r.count == 1 and "has prev None, but revision 2 left '1'" in _messages(r)[0]
    h = clean(a2=a2)
    h.op(5, "compact", 62, 63, 4)  # sent before the event came: revision 3 may be gone
    assert check_watch_prev_kv(h.sorted()).ok
    h = clean(a2=a2)
    h.op(5, "compact", 66, 67, 4)  # sent after: no excuse
    assert check_watch_prev_kv(h.sorted()).count == 1


def test_prev_kv_where_no_watch_saw_the_revisions_before_must_still_have_been_written():
    def lone(prev: Any) -> list[dict]:
        h = H(key=None)
        _writes(h)  # revision 3 (w/b) no watch delivered: it might have been w/a's
        watch(h, 10, "X", 4, 45, [(65, [put("a", 3, 4, prev=prev)])], END, prev_kv=True)
        return h.sorted()
    assert check_watch_prev_kv(lone(1)).ok and check_watch_prev_kv(lone(3)).ok
    r = check_watch_prev_kv(lone(77))
    assert r.count == 1 and "has prev '77', which nobody wrote" in _messages(r)[0]
