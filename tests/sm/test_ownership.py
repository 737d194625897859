"""Ownership: one example per rule of the own API, sessions releasing what they hold,
and properties over random command sequences."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.errors import INVALID_ARGUMENT, OWNED_BY_HIGHER_GENERATION, UNKNOWN_SESSION
from coord.sm.machine import CoordMachine
from coord.sm.records import (
    EXPIRED,
    GRANT,
    RELEASED,
    SEVER,
    SEVERED,
    Claim,
    Conflict,
    OwnershipEvent,
    SessionEvent,
    WatchEvent,
)


def machine_with(n: int) -> tuple[CoordMachine, list[int]]:
    m = CoordMachine()
    ids = [m.execute(c.OpenSession(f"s{i}", 10_000), 1).session_id for i in range(n)]
    m.drain_events()
    return m, ids


def own(m: CoordMachine, sid: int, *claims: tuple[str, int], group: str = "g"):
    return m.execute(c.Own(sid, group, tuple(Claim(r, g) for r, g in claims)))


def owner(m: CoordMachine, resource: str, group: str = "g") -> tuple[int, int]:
    r = m.query(c.GetOwner(group, resource))
    return r.owner, r.generation


# -- one test per rule -------------------------------------------------------------------


def test_no_owner_first_claim_ever_gets_generation_1():
    m, (a,) = machine_with(1)
    r = own(m, a, ("t/0", 7))
    assert r.ok and r.grants[0].generation == 1 and r.grants[0].revision == r.revision
    assert owner(m, "t/0") == (a, 1)
    assert m.drain_events() == [OwnershipEvent("g", "t/0", a, 1, r.revision, GRANT)]


def test_freed_resource_remembers_generation_next_owner_gets_last_plus_1():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0))
    assert m.execute(c.Release(a, "g", ("t/0",))).released == ("t/0",)
    assert owner(m, "t/0") == (0, 1)
    assert own(m, b, ("t/0", 0 + 1)).grants[0].generation == 2
    m.execute(c.CloseSession(b))
    assert owner(m, "t/0") == (0, 2)
    assert own(m, a, ("t/0", 1)).grants[0].generation == 3


def test_requester_already_owns_is_idempotent_same_generation():
    m, (a,) = machine_with(1)
    first = own(m, a, ("t/0", 0), ("t/1", 0))
    m.drain_events()
    again = own(m, a, ("t/0", 5), ("t/1", 0))
    assert again.ok and again.grants == first.grants
    assert again.revision == first.revision  # nothing changed, no revision bump
    assert m.revision == first.revision and m.drain_events() == []


def test_owner_with_higher_generation_refuses_and_changes_nothing():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 3))
    own(m, b, ("t/0", 1))  # b severs a: generation max(1, 1) + 1 = 2
    own(m, b, ("t/1", 0))
    m.drain_events()
    c_ = m.execute(c.OpenSession("c", 10_000)).session_id
    before = m.snapshot()
    r = own(m, c_, ("t/2", 0), ("t/0", 1))
    assert r.error == OWNED_BY_HIGHER_GENERATION
    assert r.conflicts == (Conflict("t/0", b, 2),)
    assert "session" in r.message and r.grants == ()
    assert m.snapshot() == before and m.drain_events() == []
    assert owner(m, "t/2") == (0, 0)  # all-or-nothing: t/2 was not claimed either


def test_owner_with_lower_or_equal_generation_is_severed():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0), ("t/1", 0))  # a owns both at generation 1
    m.execute(c.Put(b"eph", b"x", session_id=a))
    m.drain_events()
    r = own(m, b, ("t/0", 4))
    assert r.ok and r.severed == (a,)
    assert r.grants[0].generation == 5  # max(1, 4) + 1
    assert owner(m, "t/0") == (b, 5)
    assert owner(m, "t/1") == (0, 1)  # released with the severed session
    assert a not in m.sessions and m.kv.get(b"eph") is None
    events = m.drain_events()
    assert all(e.revision == r.revision for e in events)
    severed = [e for e in events if isinstance(e, SessionEvent)]
    assert severed == [SessionEvent(SEVERED, a, r.revision, group="g", resource="t/0",
                                    generation=5, new_owner=b, claims=(Claim("t/0", 5),))]
    assert OwnershipEvent("g", "t/1", 0, 1, r.revision, SEVER) in events
    assert OwnershipEvent("g", "t/0", b, 5, r.revision, GRANT) in events
    assert any(isinstance(e, WatchEvent) and e.type == "DELETE" for e in events)
    # equal generation also severs: b holds 5, a new session requests 5
    d = m.execute(c.OpenSession("d", 10_000)).session_id
    r2 = own(m, d, ("t/0", 5))
    assert r2.severed == (b,) and r2.grants[0].generation == 6


def test_generation_0_always_succeeds_severs_and_resets_to_1():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 100))
    assert owner(m, "t/0") == (a, 1)
    own(m, b, ("t/0", 100))
    assert owner(m, "t/0") == (b, 101)
    a2 = m.execute(c.OpenSession("a2", 10_000)).session_id
    r = own(m, a2, ("t/0", 0))
    assert r.ok and r.severed == (b,) and r.grants[0].generation == 1
    assert owner(m, "t/0") == (a2, 1)
    m.execute(c.Release(a2, "g", ("t/0",)))
    assert own(m, a2, ("t/0", 0)).grants[0].generation == 1  # a free resource resets too
    own(m, a2, ("t/0", 0))  # the owner re-claiming with 0 is idempotent, not a reset
    assert owner(m, "t/0") == (a2, 1)


def test_every_grant_returns_its_revision():
    m, (a, b) = machine_with(2)
    r1 = own(m, a, ("x", 0))
    r2 = own(m, b, ("y", 0), ("x", 1))
    assert r2.revision == r1.revision + 1
    assert [g.revision for g in r2.grants] == [r2.revision, r2.revision]
    assert m.query(c.GetOwner("g", "x")).owner_revision == r2.revision


def test_claim_many_is_one_command_and_one_revision():
    m, (a,) = machine_with(1)
    before = m.revision
    claims = tuple((f"topic/{i}", 0) for i in range(10_000))
    r = own(m, a, *claims)
    assert r.ok and len(r.grants) == 10_000 and m.revision == before + 1
    assert {g.revision for g in r.grants} == {before + 1}
    assert len(m.drain_events()) == 10_000
    assert len(m.query(c.ListOwners("g", "topic/1")).owners) == 1111


def test_groups_are_independent_and_list_owners_filters_by_prefix():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0), ("t/1", 0), ("u/0", 0))
    own(m, b, ("t/0", 0), group="other")
    assert owner(m, "t/0") == (a, 1) and owner(m, "t/0", "other") == (b, 1)
    owners = m.query(c.ListOwners("g", "t/")).owners
    assert [(o.resource, o.session_id) for o in owners] == [("t/0", a), ("t/1", a)]
    m.execute(c.Release(a, "g", ("t/1",)))
    assert [o.resource for o in m.query(c.ListOwners("g")).owners] == ["t/0", "u/0"]


def test_release_skips_what_the_session_does_not_own():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0))
    rev = m.revision
    r = m.execute(c.Release(b, "g", ("t/0", "nope")))
    assert r.ok and r.released == () and r.revision == rev == m.revision
    assert owner(m, "t/0") == (a, 1)


def test_session_close_releases_everything_with_events():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0), ("t/1", 0))
    own(m, a, ("z", 0), group="h")
    m.execute(c.Put(b"a/1", b"1", session_id=a))
    m.execute(c.Put(b"a/2", b"2", session_id=a))
    m.execute(c.Put(b"b/1", b"1", session_id=b))
    m.drain_events()
    r = m.execute(c.CloseSession(a))
    assert r.ok and r.session_id == a
    events = m.drain_events()
    assert {e.revision for e in events} == {r.revision}
    released = {(e.group, e.resource) for e in events if isinstance(e, OwnershipEvent)}
    assert released == {("g", "t/0"), ("g", "t/1"), ("h", "z")}
    assert all(e.owner == 0 for e in events if isinstance(e, OwnershipEvent))
    deleted = sorted(e.kv.key for e in events if isinstance(e, WatchEvent))
    assert deleted == [b"a/1", b"a/2"]
    assert events[-1] == SessionEvent(RELEASED, a, r.revision)
    assert m.kv.get(b"b/1") is not None and a not in m.sessions
    assert m.execute(c.CloseSession(a)).error == UNKNOWN_SESSION


def test_expire_ignores_unknown_ids_and_emits_expired():
    m, (a, b) = machine_with(2)
    own(m, a, ("t/0", 0))
    m.drain_events()
    r = m.execute(c.ExpireSessions((99, a, a)))
    assert r.ok and r.expired == (a,)
    events = m.drain_events()
    assert events[-1] == SessionEvent(EXPIRED, a, r.revision)
    rev = m.revision
    r2 = m.execute(c.ExpireSessions((a, 99)))
    assert r2.ok and r2.expired == () and m.revision == rev  # nothing to do: no change


def test_bad_own_input_is_refused_and_changes_nothing():
    m, (a,) = machine_with(1)
    own(m, a, ("t/0", 0))
    m.drain_events()
    before = m.snapshot()
    bad = [
        (c.Own(a, "g", (Claim("t/1", -1),)), INVALID_ARGUMENT),
        (c.Own(a, "", (Claim("t/1", 0),)), INVALID_ARGUMENT),
        (c.Own(a, "g", ()), INVALID_ARGUMENT),
        (c.Own(a, "g", (Claim("", 0),)), INVALID_ARGUMENT),
        (c.Own(a, "g", (Claim("t/1", 0), Claim("t/1", 1))), INVALID_ARGUMENT),
        (c.Own(a, "g", (Claim("x" * 2000, 0),)), "TOO_LARGE"),
        (c.Own(a, "g", (Claim("t/1", 1 << 60),)), INVALID_ARGUMENT),
        (c.Own(42, "g", (Claim("t/1", 0),)), UNKNOWN_SESSION),
        (c.Own(0, "g", (Claim("t/1", 0),)), INVALID_ARGUMENT),
        (c.Release(42, "g", ("t/0",)), UNKNOWN_SESSION),
        (c.Release(a, "g", ()), INVALID_ARGUMENT),
    ]
    for cmd, code in bad:
        r = m.execute(cmd)
        assert r.error == code, (cmd, r)
        assert r.message
    assert m.snapshot() == before and m.drain_events() == []


# -- properties --------------------------------------------------------------------------

SESSIONS = st.integers(1, 5)
RESOURCES = st.sampled_from(["r0", "r1", "r2", "r3"])
GROUPS = st.sampled_from(["g", "h"])

ownership_commands = st.one_of(
    st.builds(lambda: c.OpenSession("s", 5_000)),
    st.builds(c.CloseSession, SESSIONS),
    st.builds(lambda ids: c.ExpireSessions(tuple(ids)), st.lists(SESSIONS, max_size=2)),
    st.builds(
        lambda sid, g, claims: c.Own(sid, g, tuple(Claim(r, gen) for r, gen in claims.items())),
        SESSIONS, GROUPS,
        st.dictionaries(RESOURCES, st.integers(0, 6), min_size=1, max_size=3)),
    st.builds(lambda sid, g, rs: c.Release(sid, g, tuple(rs)), SESSIONS, GROUPS,
              st.lists(RESOURCES, min_size=1, max_size=3)),
    st.builds(lambda sid: c.Put(b"k%d" % sid, b"v", session_id=sid), SESSIONS),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ownership_commands, min_size=1, max_size=40))
def test_ownership_properties(cmds):
    m = CoordMachine()
    for _ in range(3):
        m.execute(c.OpenSession("s", 5_000))
    last_revision = m.revision
    last_grant_revision = 0
    # per (group, resource): generations granted since the last 0-reset
    since_reset: dict[tuple[str, str], list[int]] = {}
    for cmd in cmds:
        r = m.execute(cmd)
        # the revision is strictly monotonic: +1 per state-changing command, else unchanged
        assert m.revision in (last_revision, last_revision + 1)
        changed = m.revision != last_revision
        if changed:
            assert r.ok and r.revision == m.revision
        last_revision = m.revision
        events = m.drain_events()
        assert all(e.revision == m.revision for e in events)
        if isinstance(cmd, c.Own) and r.ok:
            requested = dict(cmd.claims)
            for grant in r.grants:
                key = (cmd.group, grant.resource)
                if not changed or grant.revision != r.revision:
                    continue  # idempotent: already held, nothing granted now
                assert grant.revision > last_grant_revision
                if requested[grant.resource] == 0:
                    assert grant.generation == 1
                    since_reset[key] = [1]
                else:
                    history = since_reset.setdefault(key, [])
                    assert all(grant.generation > g for g in history), (key, history, grant)
                    history.append(grant.generation)
            if changed:
                last_grant_revision = r.revision
        # at most one owner per (group, resource): the sessions' holdings partition the
        # owned resources, and agree with the table
        held: dict[tuple[str, str], int] = {}
        for sid in m.sessions.ids():
            for item in m.sessions.get(sid).owned:
                assert item not in held, f"{item} held by {held[item]} and {sid}"
                held[item] = sid
        table = {(g, o.resource): o.session_id for g in ("g", "h")
                 for o in m.query(c.ListOwners(g)).owners}
        assert held == table


def test_a_capture_of_many_resources_is_their_sorted_rows_as_they_were():
    """Ownership is captured as copies of its groups' dicts and written out later through
    runs of names sorted one per piece and merged: with more names than one run, in
    shuffled order, the text is still every group's rows sorted by resource, as they were
    at the capture (slots are replaced on change, never changed under a capture)."""
    import json
    import random

    from coord.sm import canonical_json
    from coord.sm.ownership import RUN

    m, sids = machine_with(3)
    names = [f"r{i:06d}" for i in range(2 * RUN + 123)]
    random.Random(5).shuffle(names)
    for i in range(0, len(names), 1000):
        own(m, sids[i // 1000 % 3], *((n, 0) for n in names[i:i + 1000]),
            group="g" if i % 2000 else "é")
    expected = [[group, [[r, s.owner, s.generation, s.revision] for r, s in sorted(slots.items())]]
                for group, slots in sorted(m.ownership._groups.items())]
    pieces = canonical_json.iter_dumps(m.ownership.capture())
    first = next(pieces)
    own(m, sids[0], (names[0], 0), (names[-1], 0), group="g")  # takeovers after the capture
    own(m, sids[0], (names[1], 0), (names[-2], 0), group="é")
    m.execute(c.CloseSession(sids[1]), 5000)
    assert json.loads(first + "".join(pieces)) == expected
    assert sum(len(rows) for _, rows in expected) == len(names)
