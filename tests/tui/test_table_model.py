"""The console's model fed by the sessions and producers streams: a listing names the
rows, a second listing (a reopened stream) drops what it no longer names and tells only
what is news; changes update one row each; the TTL countdown says "renewed" once the
streamed deadline has passed with the session still there."""

from __future__ import annotations

from coord.client.admin_streams import (
    BlockDetail,
    LeaseDetail,
    ProducerChange,
    ProducerDetail,
    SessionChange,
    SessionDetail,
)
from coord.tui.model import RENEWED_AFTER_MS, ClusterModel


def row(sid: int, remaining: int = -1) -> SessionDetail:
    return SessionDetail(sid, f"s{sid}", 10_000, False, 0, remaining)


def upsert(sid: int, snapshot: bool = False, remaining: int = -1) -> SessionChange:
    return SessionChange("upsert", row(sid, remaining), snapshot, 10, 5, "n1", True)


LISTED = SessionChange("listed", None, True, 10, 5, "n1", True)


def session_events(m: ClusterModel) -> list[str]:
    return [e.text for e in reversed(m.events) if e.kind == "session"]


def test_sessions_listing_changes_and_relisting():
    now = [100.0]
    m = ClusterModel(mono=lambda: now[0])
    for sid in (1, 2):
        m.session_change(upsert(sid, snapshot=True))
    assert "sessions" in m.loading  # the view waits for the whole listing
    m.session_change(LISTED)
    assert set(m.sessions.rows) == {1, 2} and "sessions" not in m.loading
    assert session_events(m) == []  # the first listing is not news
    m.sessions.take()

    m.session_change(upsert(3))
    m.session_change(SessionChange("ended", SessionDetail(1), False, 11, 6, "n1", True,
                                   "expired"))
    assert m.sessions.take() == {1, 3}
    assert session_events(m) == ["session 3 (s3) opened", "session 1 (s1) ended: expired"]

    # a reopened stream lists again: 2 is gone, 4 is new, 3 is unchanged (no redraw)
    for sid in (3, 4):
        m.session_change(upsert(sid, snapshot=True))
    m.session_change(LISTED)
    assert set(m.sessions.rows) == {3, 4}
    assert m.sessions.take() == {2, 4}
    assert session_events(m)[2:] == ["session 4 (s4) opened",
                                     "session 2 (s2) ended: ended while the console "
                                     "reconnected"]


def test_ttl_counts_down_then_says_renewed():
    now = [100.0]
    m = ClusterModel(mono=lambda: now[0])
    m.session_change(upsert(1, remaining=3000))
    s = m.sessions.get(1)
    now[0] += 1.0
    assert s.left_ms(now[0]) == 2000 and not s.renewed(now[0])
    now[0] += 2.0 + RENEWED_AFTER_MS / 1000 - 0.1
    assert s.left_ms(now[0]) == 0 and not s.renewed(now[0])  # expiry may be on its way
    now[0] += 0.2
    assert s.renewed(now[0])
    m.session_change(upsert(2))  # served by a follower: nothing known
    assert m.sessions.get(2).left_ms(now[0]) == -1 and not m.sessions.get(2).renewed(now[0])


def change(kind: str, detail, snapshot: bool = False, removed: bool = False
           ) -> ProducerChange:
    return ProducerChange(kind, detail, snapshot, removed, 50, 1_000, 7, 20)


def test_producer_tables():
    now = [50.0]
    m = ClusterModel(mono=lambda: now[0])
    m.producer_change(change("block", BlockDetail("a", 1, 10, 3), snapshot=True))
    m.producer_change(change("lease", LeaseDetail(11, 0, 9_000, "t", 0), snapshot=True))
    m.producer_change(change("producer", ProducerDetail("tx", 12, 0), snapshot=True))
    m.producer_change(change("listed", None, snapshot=True))
    p = m.producers
    assert (len(p.blocks), len(p.leases), len(p.producers)) == (1, 1, 1)
    assert p.next_pid == 50 and p.revision == 7
    now[0] += 2.5  # nothing streamed meanwhile: the clock is counted on locally
    assert p.now_ms(now[0]) == 1_000 + 2_500
    m.producer_change(change("producer", ProducerDetail("tx", 12, 1)))
    m.producer_change(change("lease", LeaseDetail(11, 0, 9_000, "t", 0), removed=True))
    assert p.producers.get("tx") == ("tx", 12, 1) and 11 not in p.leases.rows
    assert [e.text for e in m.events] == ["producer tx: pid 12 epoch 1"]
    # relisted: the block was forgotten meanwhile
    m.producer_change(change("producer", ProducerDetail("tx", 12, 1), snapshot=True))
    m.producer_change(change("listed", None, snapshot=True))
    assert not p.blocks.rows and set(p.producers.rows) == {"tx"}


def test_a_refusal_is_told_once_until_served_again():
    m = ClusterModel()
    for _ in range(3):  # a refused feed is tried again and again
        m.refused("sessions", "user 'x' lacks READ on admin 'inspect'")
    assert m.denials == 1 and [e.kind for e in m.events] == ["denied"]
    m.served("sessions")
    assert m.denied == {}
    m.refused("sessions", "user 'x' lacks READ on admin 'inspect'")
    assert m.denials == 2
