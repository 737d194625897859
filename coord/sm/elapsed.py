"""`ElapsedClock`: how much leader time has passed, counted only within each leader's term.

Every log entry carries the time its leader proposed it (`time_ms`, that leader's wall
clock). Comparing two readings is only meaningful when one clock made both: within one
term, the leader's. So this clock advances by the step between consecutive readings of
the same term, and not at all when the term changes — a new leader's clock may be hours
off the last one's, and a step measured across the two would be that error, not time.
The time between leaders (an election, an outage) is therefore not counted: what runs on
this clock lasts at least as long as it should, and longer by the elections it lives
through — as a session's TTL restarts when a new leader takes over.

PID leases run on it (coord/sm/pids.py): a leader whose clock is two hours ahead cannot
expire a lease leased a moment ago under another leader. It cannot help a clock stepped
forward during one leader's term; that step counts.

Deterministic: it sees only (term, time_ms) from the log, and is part of the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from coord.sm import canonical_json


@dataclass(frozen=True)
class ElapsedClock:
    now_ms: int = 0  # leader time counted so far
    term: int = 0  # the term of the latest reading
    last_ms: int = 0  # the largest reading in that term

    def at(self, term: int, time_ms: int) -> ElapsedClock:
        """The clock after a reading from an entry of `term` (the machine keeps it only
        if the entry changed state, as it keeps `clock_ms`: a refused command changes
        nothing)."""
        if term != self.term:
            return ElapsedClock(self.now_ms, term, time_ms)
        if time_ms > self.last_ms:
            return ElapsedClock(self.now_ms + time_ms - self.last_ms, term, time_ms)
        return self

    def to_state(self) -> list[int]:
        return [self.now_ms, self.term, self.last_ms]

    @classmethod
    def from_state(cls, state: list) -> ElapsedClock:
        now_ms, term, last_ms = (canonical_json.from_plain(int, x) for x in state)
        return cls(now_ms, term, last_ms)
