"""A leader that is its only voter hands out its new entries' commit index in the same
Ready as the entries (`Raft.commits_alone`), so the driver writes both in one
transaction and the commit that follows needs no write of its own; but not while a conf
change is being applied, since one that adds a voter makes the entries wait for it."""

from __future__ import annotations

from coord.raft import (
    NONE,
    ConfChange,
    ConfChangeType,
    Config,
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
    _handle(raw, rd)
    assert raw.committed == first + 1
    [applying] = _drain(raw)
    assert [e.data for e in applying.committed_entries] == [b"a", b"b"]
    assert applying.hard_state is None  # already written with the entries


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
