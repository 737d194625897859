"""The native ownership stream's checkers (coord.check.owner_stream): a clean stream
passes, and each catches its planted violation — a revision going back, a change
before the stream's start, a change twice, an acknowledged grant that never came, a
grant nobody was answered with, and a generation that went back."""

from __future__ import annotations

from typing import Any

from coord.check import check_all
from coord.check.owner_stream import (
    check_owners_history,
    check_owners_ordered,
    check_owners_reliable,
    check_owners_unique,
)
from tests.check.oplogs import H

OWNERS_CHECKS = ["owners-ordered", "owners-unique", "owners-reliable", "owners-history"]


def change(kind: str, resource: str, session: int, generation: int, rev: int) -> dict:
    return {"kind": kind, "resource": resource, "session": session,
            "generation": generation, "revision": rev}


def stream(h: H, process: int, start: int, t0: int, changes: list[tuple[int, dict]],
           end: int) -> None:
    h.stream(process, "watch_owners", t0, [(t, [c]) for t, c in changes], end, key="g",
             from_revision=start, watcher="owners-0")


def own(h: H, process: int, t: int, resource: str, session: int, generation: int | None,
        rev: int | None, status: str = "ok") -> None:
    fields: dict[str, Any] = {"group": "g", "resource": resource, "session": session}
    if status == "ok":
        fields.update(generation=generation, revision=rev)
    h.op(process, "own", t, t + 5, None, key=None, status=status, **fields)


def history(changes: list[tuple[int, dict]] | None = None, start: int = 5) -> H:
    """Session 7 owns r1 (generation 1, revision 5), session 8 takes it over
    (generation 2, revision 7), session 7's session expires (revision 9: nothing held)
    and session 9 owns r2 (revision 10)."""
    h = H(key=None)
    own(h, 0, 10, "r1", 7, 1, 5)
    own(h, 1, 20, "r1", 8, 2, 7)
    own(h, 2, 30, "r2", 9, 1, 10)
    own(h, 3, 40, "r2", 7, None, None, status="fail")  # r2 taken: refused
    stream(h, 10, start, 5, changes if changes is not None else [
        (16, change("grant", "r1", 7, 1, 5)), (26, change("grant", "r1", 8, 2, 7)),
        (36, change("grant", "r2", 9, 1, 10)), (50, change("release", "r2", 0, 1, 11))], 100)
    return h


GOOD = [(16, change("grant", "r1", 7, 1, 5)), (26, change("grant", "r1", 8, 2, 7)),
        (36, change("grant", "r2", 9, 1, 10)), (50, change("release", "r2", 0, 1, 11))]


def _messages(result) -> list[str]:
    return [v["message"] for v in result.violations]


def test_a_clean_owners_stream_passes_every_check():
    results = [r for r in check_all(history().sorted()) if r.checker.startswith("owners-")]
    assert [r.checker for r in results] == OWNERS_CHECKS
    assert all(r.ok for r in results), [(r.checker, _messages(r)) for r in results]
    assert all(r.stats == {"streams": 1, "changes": 4} for r in results)


def test_ordered_catches_a_revision_going_back_and_a_change_before_the_start():
    r = check_owners_ordered(history([(16, GOOD[1][1]), (26, GOOD[0][1]), *GOOD[2:]]).sorted())
    assert r.count == 1 and "revision 5 came after 7" in _messages(r)[0]
    r = check_owners_ordered(history(start=6).sorted())
    assert r.count == 1 and "a change at revision 5, before the revision it was started " \
        "from" in _messages(r)[0]


def test_unique_catches_a_change_delivered_twice():
    r = check_owners_unique(history([*GOOD[:2], (27, GOOD[1][1]), *GOOD[2:]]).sorted())
    assert r.count == 1 and "grant of 'r1' (session 8, generation 2) at revision 7 " \
        "delivered twice" in _messages(r)[0]


def test_reliable_catches_an_acknowledged_grant_that_never_came():
    r = check_owners_reliable(history([GOOD[0], *GOOD[2:]]).sorted())
    assert r.count == 1 and "the acknowledged grant of 'r1' (generation 2) at revision 7 " \
        "never came, though changes up to 11 did" in _messages(r)[0]
    # not owed before the stream's start
    assert check_owners_reliable(history(GOOD[1:], start=6).sorted()).ok


def test_history_catches_a_grant_nobody_was_answered_with_and_a_generation_going_back():
    r = check_owners_history(history([*GOOD[:2], (36, change("grant", "r2", 7, 1, 10)),
                                      GOOD[3]]).sorted())
    assert r.count == 1 and "'r2' granted to session 7 (generation 1) at revision 10, which " \
        "no own of that session was answered with" in _messages(r)[0]
    h = history([*GOOD, (60, change("grant", "r1", 7, 1, 12))])
    own(h, 4, 55, "r1", 7, None, None, status="info")  # its answer lost: may be this grant
    r = check_owners_history(h.sorted())
    assert r.count == 1 and "'r1' granted at generation 1 (revision 12) after generation 2 " \
        "(revision 7)" in _messages(r)[0]
