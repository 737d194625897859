"""The Kubernetes-shaped traffic's checkers (coord.check.informers): a clean list/watch/
compare-and-swap history passes, and each planted violation is caught — a stale list,
a list missing a key, an informer that kept watching after a compaction instead of
listing again (which the watch checks alone accept), an update that succeeded against
an old mod_revision, a create over a live object, and a compare refused that held."""

from __future__ import annotations

from typing import Any

from coord.check import check_all
from coord.check.informers import check_informer_cache, check_k8s_cas
from coord.check.watch_coverage import check_watch_reliable, check_watch_resumable
from tests.check.oplogs import H
from tests.check.test_watches import END, delete, put, watch


def listed(h: H, process: int, t: int, revision: int, entries: list[list[Any]],
           chain: str | None = "I.0") -> None:
    fields = {"who": "informer", "informer": "I", "chain": chain} if chain else \
        {"who": "controller"}
    h.op(process, "list", t, t + 5, None, key="w/", out=entries, revision=revision, **fields)


def history(chain: list | None = None, extra: list | None = None) -> H:
    """w/a created (2), updated (3), w/b created (4), w/a removed (5); informer I lists at
    2 and watches from 3 (its first stream breaks after 3, the next resumes from 4); a
    controller's update of w/b against an old revision is refused; it lists at 5."""
    h = H(key=None)
    h.op(0, "create", 10, 20, 1, key="w/a", revision=2)
    listed(h, 20, 25, 2, [["w/a", "1", 2]])
    h.op(0, "update", 40, 50, [2, 3], key="w/a", revision=3)
    h.op(1, "create", 60, 70, 4, key="w/b", revision=4)
    h.op(0, "remove", 80, 90, [3, None], key="w/a", revision=5)
    h.op(1, "update", 100, 110, [2, 6], key="w/b", status="fail", current=4)
    listed(h, 21, 120, 5, [["w/b", "4", 4]], chain=None)
    for step in chain if chain is not None else [
            (10, 3, 31, [(45, [put("a", 3, 3)])], 46, "info", None),
            (11, 4, 47, [(65, [put("b", 4, 4)]), (85, [delete("a", 5)])], END, "ok", None)]:
        process, start, t0, responses, end, status, compacted = step
        watch(h, process, "I.0", start, t0, responses, end, status=status,
              compacted=compacted)
    for op in extra or ():
        h.op(*op[:5], **op[5])
    return h


def _messages(result) -> list[str]:
    return [v["message"] for v in result.violations]


def test_a_clean_kubernetes_shaped_history_passes():
    results = {r.checker: r for r in check_all(history().sorted())}
    assert results["informer-cache"].ok, _messages(results["informer-cache"])
    assert results["k8s-cas"].ok, _messages(results["k8s-cas"])
    assert results["informer-cache"].stats == {"lists": 2, "caches": 1}
    assert results["k8s-cas"].stats == {"succeeded": 4, "refused": 1}
    assert all(r.ok for r in results.values() if r.checker.startswith("watch-")), \
        {n: _messages(r) for n, r in results.items()}


def test_a_stale_list_is_caught():
    h = history()
    h.rows = [r for r in h.rows if r.get("who") != "controller"]
    listed(h, 21, 120, 5, [["w/a", "3", 3], ["w/b", "4", 4]], chain=None)
    r = check_informer_cache(h.sorted())
    assert r.count == 1 and "list by controller at revision 5: 'w/a' = '3' at mod_revision " \
        "3, but it was deleted at revision 5" in _messages(r)[0]


def test_a_list_missing_a_key_is_caught_unless_a_delete_may_have_happened_unseen():
    h = history()
    h.rows = [r for r in h.rows if r.get("who") != "controller"]
    listed(h, 21, 120, 5, [], chain=None)
    r = check_informer_cache(h.sorted())
    assert r.count == 1 and "no 'w/b', but it was set to '4' at revision 4" in _messages(r)[0]
    # a delete of w/b whose answer was lost, sent before the list: no evidence
    h.op(2, "remove", 111, None, [4, None], key="w/b")
    assert check_informer_cache(h.sorted()).ok


def test_a_value_the_history_does_not_have_at_that_revision_is_caught():
    h = history()
    h.rows = [r for r in h.rows if r.get("who") != "controller"]
    listed(h, 21, 120, 5, [["w/b", "7", 4]], chain=None)
    r = check_informer_cache(h.sorted())
    assert "'w/b' = '7' at mod_revision 4, but the history has '4' there" in _messages(r)[0]


def test_an_informer_that_skips_a_compaction_instead_of_listing_again_is_caught():
    """The second stream is told the history before 5 was compacted; the informer goes
    on from 5 in the same chain, so its cache never learns of w/b (created at 4). Every
    watch check accepts that (the watch was told, and resumed where it was told to):
    only the cache, held to the history, shows the loss."""
    chain = [(10, 3, 31, [(45, [put("a", 3, 3)])], 46, "info", None),
             (11, 4, 47, [], 75, "info", 5),
             (12, 5, 76, [(85, [delete("a", 5)])], END, "ok", None)]
    rows = history(chain=chain).sorted()
    assert check_watch_reliable(rows).ok and check_watch_resumable(rows).ok
    r = check_informer_cache(rows)
    assert r.count == 1 and "informer I.0's cache at revision 5: no 'w/b', but it was set " \
        "to '4' at revision 4" in _messages(r)[0]


def test_an_update_that_succeeded_against_an_old_mod_revision_is_caught():
    extra = [(2, "update", 130, 140, [4, 7], {"key": "w/b", "revision": 6}),
             (3, "update", 135, 150, [4, 8], {"key": "w/b", "revision": 7})]
    r = check_k8s_cas(history(extra=extra).sorted())
    assert r.count == 1 and "update of 'w/b' at revision 7 compared mod_revision 4, but " \
        "the key was written at revision 6 in between" in _messages(r)[0]


def test_a_create_over_a_live_object_is_caught():
    extra = [(2, "create", 130, 140, 9, {"key": "w/b", "revision": 6})]
    r = check_k8s_cas(history(extra=extra).sorted())
    assert r.count == 1 and "create of 'w/b' at revision 6 succeeded, but the key was set " \
        "at revision 4" in _messages(r)[0]
    # a delete of w/b whose answer was lost, sent before the create: it may have happened
    extra.append((4, "remove", 120, None, [4, None], {"key": "w/b"}))
    assert check_k8s_cas(history(extra=extra).sorted()).ok


def test_a_refused_compare_that_held_is_caught():
    extra = [(2, "update", 130, 140, [4, 7], {"key": "w/b", "status": "fail", "current": 4}),
             (3, "create", 150, 160, 8, {"key": "w/c", "status": "fail", "current": None})]
    r = check_k8s_cas(history(extra=extra).sorted())
    assert r.count == 2 and "update of 'w/b' refused, but its compare held" in _messages(r)[0]
    assert "create of 'w/c' refused" in _messages(r)[1]


def test_a_list_entry_from_past_the_lists_revision_is_caught():
    h = history()
    listed(h, 22, 122, 4, [["w/a", "9", 6], ["w/b", "4", 4]], chain=None)
    r = check_informer_cache(h.sorted())
    assert r.count == 1 and "list by controller at revision 4: 'w/a' at mod_revision 6, " \
        "from the future" in _messages(r)[0]
