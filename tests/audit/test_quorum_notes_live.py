"""Periods without a quorum, noted by the members themselves: three real member
processes. First one follower is cut off alone while the majority goes on and expires a
session (legitimately): it notes nothing. Then the majority is paused (SIGSTOP) past
another session's TTL and resumed (SIGCONT): the live export holds a `note_quorum_lost`
for that period, stamped by the leader after it, and the audit's session checks pass on
the real history — both expiries included — and catch an expiry planted inside the
noted period."""

from __future__ import annotations

import time

import pytest

import coord.testing
from coord.audit.job import run_audit
from coord.client import Client
from coord.history.sink import HistorySink
from tests.audit.plants import Planter

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

SESSION_CHECKS = ["sessions.no_expiry_without_quorum", "sessions.ttl_respected"]
TTL_S = 2.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _wait(what: str, predicate, timeout: float = 20.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _rows(client: Client) -> list[dict]:
    return [r for page in client.export_history() for r in page.rows]


def _expired(rows: list[dict], session: int) -> bool:
    return any(r["kind"] == "session.expired" and r.get("session") == session for r in rows)


@pytest.fixture(scope="module")
def paused_history(tmp_path_factory):
    """(rows exported live, the leader, wall ms when the majority was paused, when the
    leader was seen read-only, resumed, the session that expired after, the member cut
    off alone, the session that expired while it was)"""
    root = tmp_path_factory.mktemp("quorum")
    with coord.testing.cluster(members=3, data_dir=root, partitionable=True) as c, \
            Client(c.endpoints) as client:
        leader = c.wait_for_leader()
        others = [n for n in c.members if n != leader]
        # A follower cut off alone: the majority keeps its quorum and expires a session.
        alone = others[0]
        expires_meanwhile = client.open_session("meanwhile", ttl=1.0).session_id
        c.cut_off(alone)
        try:
            _wait(f"{alone} to go read-only", lambda: c.status(alone).mode == "read-only",
                  timeout=10)
            majority = [c.members[n].listen for n in c.members if n != alone]
            with Client(majority) as on_majority:  # the cut-off member's log stops short
                _wait("the majority to expire a session", lambda: _expired(
                    _rows(on_majority), expires_meanwhile), timeout=15, every=0.3)
        finally:
            c.heal(alone)
        _wait(f"{alone} to be read-write again",
              lambda: c.status(alone).mode == "read-write", timeout=15)

        client.put(b"before", b"1")
        abandoned = client.open_session("abandoned", ttl=TTL_S).session_id  # no keepalive
        paused_ms = _now_ms()
        for name in others:
            c.pause(name)
        try:
            _wait("the leader to go read-only",
                  lambda: c.status(leader).mode == "read-only", timeout=10)
            read_only_ms = _now_ms()
            time.sleep(TTL_S + 0.5)  # past the abandoned session's TTL: nothing may expire
        finally:
            resumed_ms = _now_ms()
            for name in others:
                c.resume(name)
        rows = _wait("the note and the abandoned session's expiry in the export", lambda: (
            (rows := _rows(client))
            and any(r["kind"] == "note_quorum_lost" for r in rows)
            and _expired(rows, abandoned) and rows), timeout=30, every=0.5)
        yield rows, leader, paused_ms, read_only_ms, resumed_ms, abandoned, alone, \
            expires_meanwhile


def test_the_member_that_lost_its_quorum_notes_the_period(paused_history):
    rows, leader, paused_ms, read_only_ms, resumed_ms, abandoned, alone, meanwhile = \
        paused_history
    all_notes = [r for r in rows if r["kind"] == "note_quorum_lost"]
    # cut off alone while the majority committed: no period without a quorum
    assert not [n for n in all_notes if n["member"] == alone and n["since_ms"] < paused_ms]
    assert _expired(rows, meanwhile)
    notes = [r for r in all_notes if r["member"] == leader]
    assert len(notes) == 1, all_notes
    note = notes[0]
    assert note["ok"] and note["mode"] == "read-only"
    # the quorum went when the majority stopped (before the leader was seen read-only),
    # came back once it was resumed
    assert paused_ms <= note["since_ms"] <= read_only_ms
    assert resumed_ms - 10 <= note["until_ms"] <= note["time_ms"]
    # nothing committed inside the period, and the abandoned session outlived it
    inside = [r for r in rows if note["since_ms"] <= r["time_ms"] <= note["until_ms"]
              and r["kind"] not in ("noop", "conf_change")]
    assert inside == []
    expiry = next(r for r in rows if r["kind"] == "session.expired"
                  and r.get("session") == abandoned)
    assert expiry["time_ms"] >= note["until_ms"] + TTL_S * 1000 - 250


def test_the_audit_passes_the_real_history_and_catches_an_expiry_inside_the_period(
        paused_history, spark, tmp_path):
    rows, leader, *_ = paused_history
    HistorySink(tmp_path / "real").write(rows)
    result = run_audit(spark, tmp_path / "real", checks=SESSION_CHECKS, with_stats=False)
    assert result.violations == 0, result.examples

    note = next(r for r in rows if r["kind"] == "note_quorum_lost" and r["member"] == leader)
    at_ms = note["since_ms"] + 1
    covering = [n for n in rows if n["kind"] == "note_quorum_lost"
                and n["since_ms"] <= at_ms <= n["until_ms"]]  # the leader's, maybe others'
    p = Planter(rows)
    planted = p.entry("expire_sessions", {"kind": "session.expired", "session": 999},
                      revision_step=1, at_ms=at_ms, session=999, size=1)
    HistorySink(tmp_path / "planted").write(p.rows)
    result = run_audit(spark, tmp_path / "planted", checks=SESSION_CHECKS[:1],
                       with_stats=False)
    assert result.count("sessions.no_expiry_without_quorum") == len(covering) >= 1
    assert {v["index"] for v in result.examples} == {planted}  # one per covering note
