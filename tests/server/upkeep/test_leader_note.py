"""A leader names itself in the log at election, not with its first session sweep: a
member stopped a moment after it was elected must still have its term's leader in its
log (the history export's rows carry it)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from coord.raft import Role
from coord.server.node.errors import NotLeader
from coord.server.upkeep import leader_note
from coord.server.upkeep.leader_note import LeaderNote
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm import commands as c

T = 10.0


async def _no_sweep(self) -> None:
    """The session sweep does nothing here: the note must not depend on it."""


@pytest.fixture
def no_sweep(monkeypatch):
    monkeypatch.setattr(SessionTracker, "sweep", _no_sweep)


@pytest.mark.cluster
@pytest.mark.coord_cluster(members=3)
def test_the_note_comes_at_election_without_any_sweep(no_sweep, coord_cluster):
    members = [m.embedded.member for m in coord_cluster.members.values()]
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        notes = {m.machine.leader_note for m in members}
        leaders = [m for m in members if m.node.is_leader]
        if len(notes) == 1 and leaders and notes == {(leaders[0].node.term, leaders[0].me.name)}:
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"no member applied its leader's note: {notes}")
    leader = leaders[0]
    assert leader.leader_note.noted_term == leader.node.term


class _Node:
    """Status events as the driver sends them; `is_leader`/`term` follow the last one."""

    def __init__(self, events: list[tuple[Role, int]]) -> None:
        self.me = SimpleNamespace(name="m1")
        self._events = events
        self.is_leader, self.term = False, 0

    async def events(self):
        for role, term in self._events:
            self.is_leader, self.term = role is Role.LEADER, term
            yield SimpleNamespace(role=role, term=term)


def _notes(events: list[tuple[Role, int]], fail: int = 0) -> list[c.NoteLeader]:
    """What a LeaderNote proposes for `events`; its first `fail` proposals fail as a
    proposal without a leader would."""
    proposed: list[c.NoteLeader] = []
    failures = [fail]

    async def propose(note: c.NoteLeader) -> None:
        if failures[0]:
            failures[0] -= 1
            raise NotLeader(None)
        proposed.append(note)

    async def follow() -> None:
        note = LeaderNote(_Node(events), propose)
        await note._follow()

    asyncio.run(asyncio.wait_for(follow(), T))
    return proposed


def test_one_note_per_term_led_and_none_as_a_follower():
    events = [(Role.FOLLOWER, 3), (Role.LEADER, 4), (Role.LEADER, 4), (Role.FOLLOWER, 5),
              (Role.LEADER, 6)]
    assert _notes(events) == [c.NoteLeader("m1", 4), c.NoteLeader("m1", 6)]


def test_a_failed_note_is_retried_while_the_term_lasts(monkeypatch):
    monkeypatch.setattr(leader_note, "RETRY_S", 0.01)
    assert _notes([(Role.LEADER, 4)], fail=2) == [c.NoteLeader("m1", 4)]
    assert _notes([(Role.LEADER, 4)], fail=leader_note.ATTEMPTS) == []  # gave up, bounded
