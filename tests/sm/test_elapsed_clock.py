"""PID lease lifetimes run on the elapsed clock: leader time counted within each
leader's term (coord/sm/elapsed.py). A new leader's clock, however far off, cannot
expire a lease; the time between leaders is not counted; the clock is in the snapshot."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm.elapsed import ElapsedClock
from coord.sm.errors import UNKNOWN_PID
from coord.sm.machine import CoordMachine

LIFETIME_MS = 60_000
HOURS_2 = 2 * 3600 * 1000


class Log:
    """Applies commands as a member does: each entry with its index, term and the
    proposing leader's time."""

    def __init__(self, machine: CoordMachine | None = None, index: int = 0) -> None:
        self.m = machine or CoordMachine(pid_lifetime_ms=LIFETIME_MS)
        self.index = index

    def apply(self, term: int, time_ms: int, cmd: c.Command):
        self.index += 1
        return self.m.apply(self.index, term, time_ms, c.encode_command(cmd)).value

    def lead(self, term: int, time_ms: int) -> None:
        """A new leader's first entry: its note (server/upkeep/leader_note.py)."""
        assert self.apply(term, time_ms, c.NoteLeader(f"n{term}", term)).ok

    def lease(self, term: int, time_ms: int):
        return self.apply(term, time_ms, c.LeasePid("t", 0))

    def lookup(self, term: int, time_ms: int, pid: int):
        return self.apply(term, time_ms, c.LeasePid("t", 0, pid))


def test_clock_counts_steps_within_a_term_and_none_across_terms():
    clock = ElapsedClock()
    clock = clock.at(2, 1_000).at(2, 1_500).at(2, 1_400).at(2, 2_000)  # a step back: held
    assert clock.now_ms == 1_000  # 1_000 -> 1_500, then 1_500 -> 2_000
    clock = clock.at(3, 2_000 + HOURS_2).at(3, 2_100 + HOURS_2)
    assert clock.now_ms == 1_100  # the new leader's first reading counts nothing
    clock = clock.at(4, 50).at(4, 150)  # a leader whose clock is behind
    assert clock.now_ms == 1_200


def test_a_leader_two_hours_ahead_cannot_expire_a_lease_leased_a_moment_ago():
    log = Log()
    log.lead(2, 999_000)
    lease = log.lease(2, 1_000_000)
    assert lease.ok and lease.expire_ms == 1_000_000 + LIFETIME_MS
    log.lead(3, 1_000_100 + HOURS_2)
    looked = log.lookup(3, 1_000_100 + HOURS_2, lease.pid)
    assert looked.ok and looked.pid == lease.pid
    # answered in the new leader's wall time: its time plus what is left of the lifetime
    assert looked.expire_ms == 1_000_100 + HOURS_2 + LIFETIME_MS
    assert log.lookup(3, 1_000_100 + HOURS_2 + LIFETIME_MS - 1, lease.pid).ok
    gone = log.lookup(3, 1_000_100 + HOURS_2 + LIFETIME_MS, lease.pid)
    assert gone.error == UNKNOWN_PID  # its whole lifetime passed on this leader's clock


def test_the_time_between_leaders_is_not_counted():
    log = Log()
    log.lead(2, 10_000)
    lease = log.lease(2, 10_000)
    log.apply(2, 10_000 + LIFETIME_MS // 2, c.Put(b"tick", b""))  # half its life, term 2
    # term 3 begins after an outage of an hour; half a lifetime later the lease still lives
    start = 10_000 + LIFETIME_MS // 2 + 3_600_000
    log.lead(3, start)
    assert log.lookup(3, start + LIFETIME_MS // 2 - 1, lease.pid).ok
    assert log.lookup(3, start + LIFETIME_MS // 2, lease.pid).error == UNKNOWN_PID


def test_a_refused_command_leaves_the_clock_and_snapshot_alone():
    log = Log()
    log.lead(2, 1_000)
    log.lease(2, 1_000)
    before = log.m.snapshot()
    assert log.lookup(2, 30_000, 999).error == UNKNOWN_PID  # refused
    assert log.m.snapshot() == before and log.m.elapsed.now_ms == 0
    log.apply(2, 31_000, c.Put(b"k", b""))  # a change: the whole step since 1_000 counts
    assert log.m.elapsed.now_ms == 30_000


def test_the_clock_survives_a_snapshot():
    log = Log()
    log.lead(2, 1_000)
    lease = log.lease(2, 1_000)
    log.apply(2, 1_000 + LIFETIME_MS - 10, c.Put(b"k", b""))
    copy = CoordMachine(pid_lifetime_ms=LIFETIME_MS)
    copy.restore(log.m.snapshot())
    assert copy.snapshot() == log.m.snapshot() and copy.elapsed == log.m.elapsed
    restored = Log(copy, log.index)
    assert restored.lookup(2, 1_000 + LIFETIME_MS - 1, lease.pid).ok
    assert restored.lookup(2, 1_000 + LIFETIME_MS, lease.pid).error == UNKNOWN_PID
