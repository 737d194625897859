"""The ownership history behind WatchOwners from a past revision: every change kept in
order with why it happened, bounded by KV compaction and by a fixed limit, part of the
snapshot, and replaying it rebuilds the owner table."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm import owner_history
from coord.sm.errors import COMPACTED, INVALID_ARGUMENT
from coord.sm.machine import CoordMachine
from coord.sm.records import (
    EXPIRE,
    GRANT,
    RELEASE,
    RESET,
    SEVER,
    OwnershipEvent,
)
from tests.sm.test_ownership import machine_with, own, ownership_commands


def history(m: CoordMachine, revision: int = 1, group: str = "g", prefix: str = ""):
    return m.query(c.OwnerEventsSince(revision, group, prefix))


def changes(events) -> list[tuple[str, str, int, int, str]]:
    return [(e.resource, e.kind, e.owner, e.generation, e.revision) for e in events]


def test_every_kind_of_change_is_kept_in_order_with_generations():
    m, (a, b) = machine_with(2)
    r1 = own(m, a, ("p0", 1), ("p1", 1))  # grant p0, p1 at 1
    r2 = m.execute(c.Release(a, "g", ("p0",)))  # release p0 (keeps generation 1)
    r3 = own(m, b, ("p0", 1))  # reclaim p0 at 2
    r4 = own(m, b, ("p1", 1))  # takes p1 from a (1 <= 1): a severed
    r5 = own(m, a2 := m.execute(c.OpenSession("a2", 10_000)).session_id, ("p2", 1))
    r6 = own(m, a2, ("p0", 0))  # reset: severs b, which frees p1
    r7 = m.execute(c.ExpireSessions((a2,)))
    got = history(m)
    assert got.ok and got.revision == m.revision and got.compact_revision == 0
    assert changes(got.events) == [
        ("p0", GRANT, a, 1, r1.revision), ("p1", GRANT, a, 1, r1.revision),
        ("p0", RELEASE, 0, 1, r2.revision),
        ("p0", GRANT, b, 2, r3.revision),
        ("p1", GRANT, b, 2, r4.revision),
        ("p2", GRANT, a2, 1, r5.revision),
        ("p1", SEVER, 0, 2, r6.revision), ("p0", RESET, a2, 1, r6.revision),
        ("p0", EXPIRE, 0, 1, r7.revision), ("p2", EXPIRE, 0, 1, r7.revision),
    ]
    # a later start replays the suffix; the drained events are the same records
    assert changes(history(m, r4.revision).events) == changes(got.events)[4:]
    assert history(m, m.revision + 1).events == ()


def test_closing_a_session_records_releases():
    m, (a,) = machine_with(1)
    own(m, a, ("x", 0))
    r = m.execute(c.CloseSession(a))
    assert changes(history(m, r.revision).events) == [("x", RELEASE, 0, 1, r.revision)]


def test_history_is_per_group_and_prefix():
    m, (a,) = machine_with(1)
    own(m, a, ("t/0", 0), ("t/1", 0), ("u/0", 0))
    own(m, a, ("t/0", 0), group="other")
    assert [e.resource for e in history(m, prefix="t/").events] == ["t/0", "t/1"]
    assert [(e.group, e.resource) for e in history(m, group="other").events] == [("other", "t/0")]
    assert history(m, group="none").events == ()


def test_bad_requests_are_refused():
    m, _ = machine_with(1)
    for cmd in (c.OwnerEventsSince(0, "g"), c.OwnerEventsSince(1, ""),
                c.OwnerEventsSince(-3, "g"), c.OwnerEventsSince(1, "g", 5)):  # type: ignore
        assert m.query(cmd).error == INVALID_ARGUMENT, cmd


def test_kv_compaction_compacts_the_ownership_history_too():
    m, (a,) = machine_with(1)
    r1 = own(m, a, ("p0", 0))
    r2 = m.execute(c.Release(a, "g", ("p0",)))
    r3 = own(m, a, ("p0", 1))
    assert m.execute(c.Compact(r2.revision)).ok
    for start in (1, r1.revision, r2.revision):
        refused = history(m, start)
        assert refused.error == COMPACTED and refused.compact_revision == r2.revision
        assert "compact" in refused.message
    assert changes(history(m, r2.revision + 1).events) == [("p0", GRANT, a, 2, r3.revision)]


def test_the_history_keeps_at_most_its_limit_of_earlier_revisions():
    m = CoordMachine(owner_history_limit=16)
    a = m.execute(c.OpenSession("a", 10_000)).session_id
    emitted: list[OwnershipEvent] = []
    for i in range(40):
        own(m, a, (f"r{i % 5}", 1), (f"s{i % 3}", 1))
        m.execute(c.Release(a, "g", (f"r{i % 5}",)))
        emitted += [e for e in m.drain_events() if isinstance(e, OwnershipEvent)]
        assert len(m.ownership.history) <= 16
    floor = m.ownership.history.compact_revision
    assert 0 < floor < m.revision
    assert history(m, floor).error == COMPACTED
    kept = history(m, floor + 1).events
    assert kept == tuple(e for e in emitted if e.revision > floor)
    assert len(kept) >= 16 - 16 // 8 - 2  # trimmed to 7/8, by whole revisions


def test_one_command_larger_than_the_limit_is_kept_whole():
    m = CoordMachine(owner_history_limit=4)
    a = m.execute(c.OpenSession("a", 10_000)).session_id
    own(m, a, ("early", 0))
    r = own(m, a, *((f"r{i}", 0) for i in range(10)))
    assert len(history(m, r.revision).events) == 10  # never split a revision
    assert m.ownership.history.compact_revision == r.revision - 1
    m.execute(c.Release(a, "g", ("early",)))  # the next command trims it
    assert len(m.ownership.history) <= 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 12)), min_size=1, max_size=30),
       st.sampled_from([3, 8, 16]))
def test_changes_recorded_together_are_kept_as_if_recorded_one_by_one(calls, limit):
    """An own records its changes in one call, a command may make several calls at one
    revision (a sever's frees, then the grants), and a call may record nothing; what the
    history keeps past its limit must not depend on that grouping (members recording them
    one at a time, or a snapshot taken by either, must agree)."""
    together, one_by_one = (owner_history.OwnerHistory(limit) for _ in range(2))
    revision = 1
    for next_revision, size in calls:
        revision += next_revision
        events = [OwnershipEvent("g", f"r{i}", 1, 1, revision, GRANT) for i in range(size)]
        together.extend(events)
        for e in events:
            one_by_one.extend([e])
        assert together.compact_revision == one_by_one.compact_revision
        kept = together.since(together.compact_revision + 1, "g")
        assert kept == one_by_one.since(one_by_one.compact_revision + 1, "g")


def test_the_history_is_in_the_snapshot():
    m, (a, b) = machine_with(2)
    own(m, a, ("p0", 0))
    r = own(m, b, ("p0", 1))
    assert m.execute(c.Compact(r.revision - 1)).ok
    copy = CoordMachine()
    copy.restore(m.snapshot())
    assert copy.snapshot() == m.snapshot()
    assert history(copy, r.revision).events == history(m, r.revision).events != ()
    assert copy.ownership.history.compact_revision == r.revision - 1


def test_bad_history_state_is_refused():
    h = owner_history.OwnerHistory()
    for bad in (
        {"compact_revision": -1, "events": []},
        {"compact_revision": 0, "events": [["g", "r", 1, 1, 2, "grant"],
                                           ["g", "r", 0, 1, 1, "release"]]},
        {"compact_revision": 5, "events": [["g", "r", 1, 1, 5, "grant"]]},
        {"compact_revision": 0, "events": [["g", "r", 1, 1, 2, "stolen"]]},
        {"compact_revision": 0, "events": [["g", "r", True, 1, 2, "grant"]]},
    ):
        try:
            h.load_state(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


# -- properties --------------------------------------------------------------------------

history_commands = st.one_of(
    ownership_commands,
    st.builds(lambda back: ("compact", back), st.integers(0, 4)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(history_commands, min_size=1, max_size=50), st.sampled_from([3, 8, 10_000]))
def test_replay_from_any_retained_revision_is_exactly_what_happened(cmds, limit):
    """Whatever happens, for every start after the compact revision the history is
    exactly the ownership events emitted since then, in order; starts at or below it are
    COMPACTED; and with nothing forgotten, folding the events rebuilds the owner table."""
    m = CoordMachine(owner_history_limit=limit)
    for _ in range(3):
        m.execute(c.OpenSession("s", 5_000))
    emitted: list[OwnershipEvent] = []
    for cmd in cmds:
        if isinstance(cmd, tuple):  # compact a few revisions back
            target = m.revision - cmd[1]
            if target > m.kv.compact_revision:
                assert m.execute(c.Compact(target)).ok
        else:
            m.execute(cmd)
        emitted += [e for e in m.drain_events() if isinstance(e, OwnershipEvent)]
        hist = m.ownership.history
        floor = hist.compact_revision
        assert floor >= m.kv.compact_revision
        if floor:
            assert history(m, floor).error == COMPACTED
        for group in ("g", "h"):
            mine = [e for e in emitted if e.group == group]
            for start in range(floor + 1, m.revision + 2):
                got = history(m, start, group)
                assert got.ok and got.compact_revision == floor
                assert list(got.events) == [e for e in mine if e.revision >= start]
    if m.ownership.history.compact_revision == 0:
        for group in ("g", "h"):
            table: dict[str, tuple[int, int]] = {}
            for e in history(m, 1, group).events:
                if e.owner:
                    table[e.resource] = (e.owner, e.generation)
                else:
                    table.pop(e.resource, None)
            owners = m.query(c.ListOwners(group)).owners
            assert table == {o.resource: (o.session_id, o.generation) for o in owners}
