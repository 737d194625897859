"""The simulated network and its clock. Time is ticks of `SUBSTEPS` sub-steps; message
delays are counted in sub-steps. A message sent is lost, duplicated or delayed (sometimes
for many ticks) as the seed's profile says, so messages also reorder; partitions block
links until they heal; a snapshot's sender hears how its delivery went a sub-step later,
as it would from a transport. Once repaired, the network neither loses, duplicates nor
holds back anything, and blocks no link."""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Iterator

from coord.raft.types import Message, MessageType
from coord.rafttest.outcome import Stats
from coord.rafttest.profile import Profile

SUBSTEPS = 4
"""Network sub-steps per tick: message delays are counted in these."""

Link = tuple[int, int]
"""(from, to): a direction between two member ids."""


class Network:
    def __init__(self, rng: random.Random, profile: Profile, stats: Stats) -> None:
        self.rng, self.p, self.stats = rng, profile, stats
        self.repaired = False
        self.in_flight: list[tuple[int, int, Message, int]] = []  # (due, seq, msg, sender inc.)
        self.seq = 0
        self.reports: list[tuple[int, int, int, int, bool]] = []  # due, from, inc, to, ok
        self.partitions: list[tuple[int, frozenset[Link]]] = []  # (heals at tick, links)
        self.blocked: frozenset[Link] = frozenset()

    def send(self, m: Message, inc: int, now: int) -> bool:
        """Put `m`, from its sender in incarnation `inc`, on the wire; False: it is lost."""
        rng, p, faulty = self.rng, self.p, not self.repaired
        if m.type is MessageType.SNAP:
            self.stats.snapshots_sent += 1
        if faulty and rng.random() < p.loss:
            return False
        copies = 2 if faulty and rng.random() < p.dup else 1
        for _ in range(copies):
            if faulty and rng.random() < p.long_delay:
                delay = rng.randint(2 * SUBSTEPS, 15 * SUBSTEPS)
            else:
                delay = 1 + rng.randrange(p.max_delay if faulty else 2)
            self.seq += 1
            heapq.heappush(self.in_flight, (now + delay, self.seq, m, inc))
        return True

    def due(self, now: int) -> Iterator[tuple[Message, int]]:
        """The messages due by `now`, earliest first, each with its sender's incarnation."""
        while self.in_flight and self.in_flight[0][0] <= now:
            _, _, m, inc = heapq.heappop(self.in_flight)
            yield m, inc

    def report(self, frm: int, inc: int, to: int, ok: bool, now: int) -> None:
        """The sender's transport learns how a snapshot went, a little later."""
        self.reports.append((now + 1, frm, inc, to, ok))

    def due_reports(self, now: int) -> list[tuple[int, int, int, bool]]:
        """The snapshot reports due by `now`: (from, its incarnation, to, ok)."""
        due = [r for r in self.reports if r[0] <= now]
        if due:
            self.reports = [r for r in self.reports if r[0] > now]
        return [r[1:] for r in due]

    def blocks(self, frm: int, to: int) -> bool:
        return (frm, to) in self.blocked

    def cut(self, links: Iterable[Link], heals_at: int) -> None:
        self.partitions.append((heals_at, frozenset(links)))
        self._set_blocked()

    def heal(self, tick: int) -> bool:
        """Heal the partitions due by `tick`; True if any healed."""
        if not any(h <= tick for h, _ in self.partitions):
            return False
        self.partitions = [(h, links) for h, links in self.partitions if h > tick]
        self._set_blocked()
        return True

    def repair(self) -> None:
        """Every partition healed and no fault from now on."""
        self.repaired = True
        self.partitions = []
        self._set_blocked()

    def _set_blocked(self) -> None:
        self.blocked = frozenset().union(*(links for _, links in self.partitions))
