"""Which periods a member notes as "without a quorum", decided from the log it applied
once back (the real-process test, SIGSTOP of a majority, is
tests/audit/test_quorum_notes_live.py). A member cut off alone while the majority kept
committing must note nothing: the audit would flag the majority's legitimate expiries."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from coord.raft import Entry, EntryType
from coord.server.node.errors import NoLeader, Timeout
from coord.server.storage.log_format import entry_data
from coord.server.upkeep import quorum_notes
from coord.server.upkeep.mode import READ_ONLY, READ_WRITE, ModeChange
from coord.server.upkeep.quorum_notes import Lost, QuorumNotes
from coord.sm.commands import NoteQuorumLost

SINCE = 1_000_000


@dataclass
class _Me:
    name: str = "n1"


@dataclass
class _Status:
    commit: int


@dataclass
class FakeNode:
    """What QuorumNotes reads of a node."""

    term: int = 2
    applied_index: int = 10
    commit: int = 10
    lost_for: float = 0.5
    me: _Me = field(default_factory=_Me)

    def status(self) -> _Status:
        return _Status(self.commit)

    def quorum_lost_for(self) -> float:
        return self.lost_for


def stamped(index: int, term: int, time_ms: int) -> Entry:
    return Entry(term, index, EntryType.NORMAL, entry_data(time_ms, b"x"))


class Log:
    def __init__(self, entries: list[Entry], first: int = 1) -> None:
        self.entries = entries
        self.first = first  # entries before it were compacted

    def __call__(self, lo: int, hi: int) -> list[Entry]:
        return [e for e in self.entries if lo <= e.index < hi and e.index >= self.first]


def period(node: FakeNode, log: Log, lost: Lost, back_ms: int = SINCE + 5_000):
    async def run():
        return await QuorumNotes(node, log, _no_propose).period(lost, back_ms)
    return asyncio.run(run())


async def _no_propose(note):
    raise AssertionError("nothing should be proposed")


def test_same_term_means_a_leader_kept_its_quorum():
    node = FakeNode(term=2, applied_index=12)
    log = Log([stamped(11, 2, SINCE + 100), stamped(12, 2, SINCE + 200)])
    until, why = period(node, log, Lost(SINCE, 10, 2, READ_ONLY))
    assert until is None and "kept a quorum" in why


def test_a_new_term_ends_the_period_just_before_its_first_stamped_entry():
    node = FakeNode(term=3, applied_index=14)
    log = Log([
        stamped(11, 2, SINCE - 50),  # proposed before the loss, committed after: ignored
        Entry(3, 12, EntryType.NORMAL, b""),  # the new leader's no-op: no stamp
        Entry(3, 13, EntryType.CONF_CHANGE, b"\x00" * 12),
        stamped(14, 3, SINCE + 4_000),
    ])
    assert period(node, log, Lost(SINCE, 10, 2, READ_ONLY)) == (SINCE + 3_999, "")
    # ...or where the member came back, if that is earlier
    assert period(node, log, Lost(SINCE, 10, 2, READ_ONLY), back_ms=SINCE + 3_000)[0] == (
        SINCE + 3_000)


def test_the_old_leader_committing_after_the_loss_means_no_note():
    """A minority follower: the majority's leader (same term) committed, then its leader
    changed (a newer term now) — a quorum existed all along."""
    node = FakeNode(term=3, applied_index=13)
    log = Log([stamped(11, 2, SINCE + 10), stamped(12, 3, SINCE + 900),
               stamped(13, 3, SINCE + 950)])
    until, why = period(node, log, Lost(SINCE, 10, 2, READ_ONLY))
    assert until is None and "term 2's leader committed entry 11" in why


def test_a_compacted_log_cannot_tell_and_notes_nothing():
    node = FakeNode(term=3, applied_index=30)
    log = Log([stamped(i, 3, SINCE + i) for i in range(20, 31)], first=20)
    until, why = period(node, log, Lost(SINCE, 10, 2, READ_ONLY))
    assert until is None and "compacted" in why


def test_waits_a_bounded_time_for_the_new_leaders_first_entry(monkeypatch):
    monkeypatch.setattr(quorum_notes, "WAIT_S", 0.3)
    node = FakeNode(term=3, applied_index=10)
    log = Log([stamped(11, 3, SINCE + 700)])
    assert period(node, log, Lost(SINCE, 10, 2, READ_ONLY))[0] is None  # never applied
    # Applied while it waits (it polled and found nothing first): the bound now only
    # catches a hang, not a loaded machine that runs the poll late.
    monkeypatch.setattr(quorum_notes, "WAIT_S", 60.0)

    async def applied_later():
        notes = QuorumNotes(node, log, _no_propose)
        task = asyncio.create_task(notes.period(Lost(SINCE, 10, 2, READ_ONLY), SINCE + 5_000))
        await asyncio.sleep(0.15)
        node.applied_index = 11
        return await task

    assert asyncio.run(applied_later()) == (SINCE + 699, "")


@pytest.mark.parametrize("mode", [READ_ONLY, "no-quorum"])
def test_mode_changes_propose_the_note_through_the_coordinator(mode):
    node = FakeNode(term=2, applied_index=10, commit=10, lost_for=0.4)
    log = Log([stamped(11, 3, 0)])
    proposed: list[NoteQuorumLost] = []

    async def propose(note):
        proposed.append(note)

    async def run():
        notes = QuorumNotes(node, log, propose)
        notes.changed(ModeChange(mode, "n1", 2, 5))
        since = notes._lost.since_ms
        notes.changed(ModeChange(mode, "n1", 2, 5))  # still cut off: the first loss counts
        assert notes._lost.since_ms == since
        node.term, node.applied_index = 3, 11
        log.entries = [stamped(11, 3, since + 100)]  # the new leader, before we are back
        notes.changed(ModeChange(READ_WRITE, "n1", 3, 6))
        for _ in range(50):
            if proposed:
                break
            await asyncio.sleep(0.02)
        await notes.stop()
        return since

    since = asyncio.run(run())
    assert proposed == [NoteQuorumLost("n1", since, since + 99, mode)]


@pytest.mark.parametrize("error, calls", [(NoLeader(), 2), (Timeout(), 1)])
def test_a_note_is_retried_only_when_it_surely_was_not_committed(monkeypatch, error, calls):
    """NoLeader: not applied, try again. Timeout: it may have been (the note has no
    request id): a retry could write it twice, so it is not retried."""
    monkeypatch.setattr(quorum_notes, "RETRY_S", 0.0)
    node = FakeNode(term=3, applied_index=11)
    log = Log([stamped(11, 3, SINCE + 100)])
    attempts: list[NoteQuorumLost] = []

    async def propose(note):
        attempts.append(note)
        if len(attempts) == 1:
            raise error

    async def run():
        notes = QuorumNotes(node, log, propose)
        await notes._note(Lost(SINCE, 10, 2, READ_ONLY), SINCE + 5_000)

    asyncio.run(run())
    assert len(attempts) == calls
