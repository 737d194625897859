"""A leader that is its only voter hands out its new entries' commit index in the same
Ready as the entries (`Raft.commits_alone`), so the driver writes both in one
transaction and the commit that follows needs no write of its own; but not while a conf
change is being applied, since one that adds a voter makes the entries wait for it.
The same Ready applies them too (the driver persists a Ready before it applies it), so
a lone voter's write is one Ready, unless that would leave a gap, overrun an apply batch
or apply a conf change before it is committed."""

from __future__ import annotations

from coord.raft import (
    NONE,
    ConfChange,
    ConfChangeType,
    Config,
    Entry,
    EntryType,
    HardState,
    RawNode,
    Ready,
    bootstrap_entries,
    conf_change_of,
)


def _alone() -> RawNode:
    """Voter 1 of a one-member cluster, leading, its Readies so far handled."""
    raw = RawNode(
        Config(1, election_tick=10, heartbeat_tick=1, seed=1),
        HardState(1, NONE, 1),
        None,
        bootstrap_entries([1]),
    )
    _drain(raw)  # the bootstrap entry: voter 1
    raw.campaign()
    _drain(raw)
    assert raw.is_leader
    return raw


def _handle(raw: RawNode, rd: Ready) -> None:
    """What the driver does with a Ready: apply its conf changes, then advance."""
    for e in rd.committed_entries:
        if e.type is EntryType.CONF_CHANGE:
            raw.apply_conf_change(conf_change_of(e))
    raw.advance(rd)


def _drain(raw: RawNode) -> list[Ready]:
    readies = []
    while raw.has_ready():
        rd = raw.ready()
        readies.append(rd)
        _handle(raw, rd)
    return readies


def test_a_lone_voters_entries_carry_their_own_commit_index() -> None:
    raw = _alone()
    first, _ = raw.propose([b"a", b"b"])
    rd = raw.ready()
    assert [e.index for e in rd.entries] == [first, first + 1]
    assert rd.hard_state is not None and rd.hard_state.commit == first + 1
    assert [e.data for e in rd.committed_entries] == [b"a", b"b"]  # applied once durable
    _handle(raw, rd)
    assert raw.committed == first + 1 and raw.status().applied == first + 1
    assert not raw.has_ready()  # no second Ready to apply them


def test_its_entries_are_applied_after_those_committed_before_them_without_a_gap() -> None:
    raw = _alone()
    first, _ = raw.propose([b"a"])
    _handle(raw, _withheld_apply(raw.ready()))  # persisted, its apply left to later
    assert raw.committed == first and raw.status().applied == first - 1
    second, _ = raw.propose([b"b"])
    rd = raw.ready()
    assert [e.index for e in rd.committed_entries] == [first, second]
    _handle(raw, rd)
    assert raw.status().applied == second


def test_not_past_one_apply_batch() -> None:
    raw = _alone()
    raw.MAX_APPLY_BATCH = 2
    first, _ = raw.propose([b"a", b"b", b"c"])
    rd = raw.ready()
    assert rd.committed_entries == [] and rd.hard_state.commit == first + 2
    _handle(raw, rd)
    assert [len(r.committed_entries) for r in _drain(raw)] == [2, 1]


def test_a_conf_change_is_not_applied_in_the_ready_that_persists_it() -> None:
    raw = _alone()
    cc_index, _ = raw.propose_conf_change(ConfChange(ConfChangeType.ADD_VOTER, 2))
    rd = raw.ready()
    assert rd.committed_entries == [] and rd.hard_state.commit == cc_index
    _handle(raw, rd)
    assert [e.index for e in _drain(raw)[0].committed_entries] == [cc_index]


def test_not_past_entries_of_an_earlier_term_left_uncommitted() -> None:
    """A leader elected over entries it persisted in an earlier term, not yet committed:
    its new entry does not join the Ready's apply over the gap; all of them are applied
    once its term's entry commits them."""
    earlier = [Entry(1, 2, EntryType.NORMAL, b"x"), Entry(1, 3, EntryType.NORMAL, b"y")]
    raw = RawNode(Config(1, election_tick=10, heartbeat_tick=1, seed=1),
                  HardState(1, NONE, 1), None, bootstrap_entries([1]) + earlier)
    _drain(raw)
    raw.campaign()
    rd = raw.ready()
    assert rd.entries[-1].index == 4 and rd.hard_state.commit == 4
    assert [e.index for e in rd.committed_entries] == []
    _handle(raw, rd)
    assert [e.index for r in _drain(raw) for e in r.committed_entries] == [2, 3, 4]


def _withheld_apply(rd: Ready) -> Ready:
    """`rd` with nothing to apply, as a driver that applies later would see it."""
    rd.committed_entries = []
    return rd


def test_not_while_a_conf_change_that_adds_a_voter_is_applied() -> None:
    raw = _alone()
    cc_index, _ = raw.propose_conf_change(ConfChange(ConfChangeType.ADD_VOTER, 2))
    rd = raw.ready()
    _handle(raw, rd)  # the conf change is durable, so committed: voters are still {1}
    first, _ = raw.propose([b"a"])  # goes out in the Ready that applies the conf change
    rd = raw.ready()
    assert [e.index for e in rd.committed_entries] == [cc_index]
    assert [e.index for e in rd.entries] == [first]
    assert rd.hard_state is None or rd.hard_state.commit == cc_index
    _handle(raw, rd)
    assert raw.conf_state.voters == {1, 2}
    assert raw.committed == cc_index  # "a" waits for voter 2 now
    later = _drain(raw)
    assert all(rd.hard_state is None or rd.hard_state.commit == cc_index for rd in later)
    assert raw.committed == cc_index  # and still does once everything is handled
