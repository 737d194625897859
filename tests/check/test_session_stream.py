"""The session event stream's checker (coord.check.session_stream): clean streams pass,
and each planted violation is caught — a revision going back, an event twice, two
ends, an event after the end, an acknowledged close that never told its session, an
end that is not what ended it, and an end the owners stream does not show."""

from __future__ import annotations

from typing import Any

from coord.check import check_all
from coord.check.session_stream import check_session_events
from tests.check.oplogs import H
from tests.check.test_owner_stream import change, own, stream


def events(h: H, process: int, session: int, ending: str, t0: int,
           evs: list[tuple[int, dict]], end: int) -> None:
    h.stream(process, "session_events", t0, [(t, [e]) for t, e in evs], end, key="g",
             resource="ev0", session=session, ending=ending)


def ev(type_: str, rev: int, new_owner: int = 0, generation: int = 0) -> dict[str, Any]:
    return {"type": type_, "revision": rev, "resource": "ev0" if new_owner else "",
            "generation": generation, "new_owner": new_owner}


def close(h: H, process: int, t: int, session: int, rev: int) -> None:
    h.op(process, "close_session", t, t + 5, None, key=None, session=session, revision=rev)


def history(first: list | None = None, second: list | None = None,
            owners: list | None = None) -> H:
    """Session 5 owns ev0 (revision 3) and is closed (released at 4); session 6 owns it
    (5) and session 7 takes it over at generation 3 (severed at 6). An owners stream
    from 3 shows all of it."""
    h = H(key=None)
    events(h, 20, 5, "close", 1, first if first is not None else [(12, ev("released", 4))],
           15)
    own(h, 0, 2, "ev0", 5, 1, 3)
    close(h, 1, 8, 5, 4)
    events(h, 21, 6, "sever", 16, second if second is not None else [
        (32, ev("severed", 6, new_owner=7, generation=3))], 35)
    own(h, 0, 17, "ev0", 6, 2, 5)
    h.op(2, "own", 25, 30, None, key=None, group="g", resource="ev0", session=7,
         generation=3)
    h.rows[-1]["revision"] = 6  # the takeover's answer
    stream(h, 30, 3, 0, owners if owners is not None else [
        (6, change("grant", "ev0", 5, 1, 3)), (11, change("release", "ev0", 0, 1, 4)),
        (21, change("grant", "ev0", 6, 2, 5)), (31, change("grant", "ev0", 7, 3, 6))], 50)
    return h


def _messages(result) -> list[str]:
    return [v["message"] for v in result.violations]


def test_clean_session_streams_pass():
    (r,) = [r for r in check_all(history().sorted()) if r.checker == "session-events"]
    assert r.ok, _messages(r)
    assert r.stats == {"streams": 2, "events": 2, "ends": 2, "gone": 0, "undrained": 0}


def test_a_revision_going_back_an_event_twice_and_two_ends_are_caught():
    r = check_session_events(history(first=[(10, ev("mode_changed", 4)),
                                            (12, ev("mode_changed", 3)),
                                            (13, ev("released", 4))]).sorted())
    assert "revision 3 came after 4" in _messages(r)[0]
    r = check_session_events(history(first=[(12, ev("released", 4)),
                                            (13, ev("released", 4))]).sorted())
    assert "released at revision 4 delivered twice" in _messages(r)[0]
    assert "ended twice (released, then released)" in _messages(r)[1]


def test_an_event_after_the_end_is_caught():
    r = check_session_events(history(first=[(12, ev("released", 4)),
                                            (13, ev("mode_changed", 4))]).sorted())
    assert r.count == 1 and "session 5's events: an event after its released" in \
        _messages(r)[0]


def test_an_acknowledged_close_that_never_told_its_session_is_caught():
    r = check_session_events(history(first=[]).sorted())
    assert r.count == 1 and "session 5's events: no released event, though its close " \
        "session was acknowledged" in _messages(r)[0]
    # the client said it learned of the end without hearing why (its stream broke)
    r = check_session_events(history(first=[(12, {**ev("gone", 0)})]).sorted())
    assert r.ok and r.stats["gone"] == 1, _messages(r)
    # the client stopped waiting before any end came (a majority was down): unknown, so
    # counted, not judged
    h = history(first=[])
    (ended,) = [r for r in h.rows if r["f"] == "session_events" and r["type"] == "ok"
                and r["session"] == 5]
    ended["type"] = "info"
    r = check_session_events(h.sorted())
    assert r.ok and r.stats["undrained"] == 1, _messages(r)


def test_an_end_that_is_not_what_ended_the_session_is_caught():
    r = check_session_events(history(second=[(32, ev("severed", 6, new_owner=8,
                                                      generation=3))]).sorted())
    assert r.count == 1 and "session 6's events: severed at revision 6, but its own said " \
        "new_owner 7" in _messages(r)[0]
    r = check_session_events(history(first=[(12, ev("expired", 4))]).sorted())
    assert "expired at revision 4, but its close session said type 'released'" in \
        _messages(r)[0]


def test_an_end_the_owners_stream_does_not_show_is_caught():
    r = check_session_events(history(owners=[
        (6, change("grant", "ev0", 5, 1, 3)), (21, change("grant", "ev0", 6, 2, 5)),
        (31, change("grant", "ev0", 7, 3, 6))]).sorted())
    assert r.count == 1 and "session 5's events: released at revision 4, but owners " \
        "stream owners-0" in _messages(r)[0] and "no change of 'ev0' there" in _messages(r)[0]


def test_a_session_that_held_nothing_ends_without_an_owner_change():
    """Its own refused, session 5 is closed: released at the current revision, which
    no owners stream shows a change of ev0 at (the end freed nothing)."""
    h = history(owners=[(21, change("grant", "ev0", 6, 2, 5)),
                        (31, change("grant", "ev0", 7, 3, 6))])
    h.rows = [r for r in h.rows if not (r["f"] == "own" and r.get("session") == 5)]
    own(h, 0, 2, "ev0", 5, None, None, status="fail")
    r = check_session_events(h.sorted())
    assert r.ok and r.stats["ends"] == 2, _messages(r)
