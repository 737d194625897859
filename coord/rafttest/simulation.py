"""One seed's run: the cluster set up, `steps` ticks of workload and faults, each
followed by a round of the cluster, then the healing phase, which checks liveness: with
the network repaired and every member restarted, within a bounded number of ticks a
single leader exists and a fresh proposal is applied by every member of its
configuration, and every read handed to a leader that still leads in the same term has
been answered (a lost heartbeat must not strand a read)."""

from __future__ import annotations

from typing import TextIO

from coord.raft.errors import ProposalDroppedError
from coord.rafttest import workload
from coord.rafttest.cluster import Cluster
from coord.rafttest.outcome import DEFAULT_STEPS, InvariantViolation, Stats


class Simulation:
    def __init__(
        self,
        seed: int,
        nodes: int = 3,
        steps: int = DEFAULT_STEPS,
        verbose: int = 0,
        out: TextIO | None = None,
    ) -> None:
        self.cluster = Cluster(seed, nodes, verbose, out)
        self.steps = steps

    def run(self) -> Stats:
        c = self.cluster
        try:
            c.setup()
            for t in range(self.steps):
                c.tick = t
                workload.step(c)
                c.round()
            self._settle()
        except InvariantViolation as v:
            v.seed, v.nodes, v.steps = c.seed, c.n, self.steps
            v.where = f"tick {c.tick}"
            if c.verbose:
                c.trace(f"VIOLATION {v.invariant}: {v.detail}\n{c.describe()}")
            raise
        c.stats.ticks = c.tick
        c.stats.committed = c.check.max_commit
        return c.stats

    def _settle(self) -> None:
        """Heal everything and demand progress within a bounded time."""
        c = self.cluster
        c.final = True
        c.net.repair()
        for node in c.nodes.values():
            node.crash_stage = -1
            if node.disk is not None and node.raw is None:
                c.restart(node)
        c.trace("HEAL: network repaired, every member up; waiting for progress")
        limit = 60 * c.p.election_tick
        goal: tuple[bytes, int, int, int] | None = None  # payload, index, leader, term
        for _ in range(limit):
            c.tick += 1
            c.round()
            leader = c.stable_leader()
            if leader is None:
                continue
            term = leader.raw.raft.term  # type: ignore[union-attr]
            if goal is not None:
                payload, index, by, in_term = goal
                e = c.check.committed.get(index)
                if e is None and (by, in_term) != (leader.id, term):
                    goal = None  # its leader is gone; the entry may never commit: again
                elif e is not None and e.data != payload:
                    goal = None  # overwritten by a newer leader before committing: again
                elif e is not None:
                    members = leader.raw.raft.conf.members  # type: ignore[union-attr]
                    if all(c.nodes[i].sm.index >= index for i in members):
                        if len(c.leaders()) != 1:
                            continue
                        c.trace(f"progress: {payload.decode()} applied everywhere")
                        return self._settle_reads()
            if goal is None:
                c.counter += 1
                payload = b"final%d" % c.counter
                try:
                    index, _ = leader.raw.propose([payload])  # type: ignore[union-attr]
                except ProposalDroppedError:
                    continue
                goal = (payload, index, leader.id, term)
                c.trace(f"{leader.id} proposes {payload.decode()} at {index}")
        leaders = [n.id for n in c.leaders()]
        raise InvariantViolation(
            "liveness",
            f"no progress {limit} ticks after healing (leaders: {leaders}, goal: {goal})\n"
            + c.describe(),
        )

    def _settle_reads(self) -> None:
        """A read handed to a leader is answered as long as that leader keeps leading: the
        client only has to retry after a leadership change, not after a lost message."""
        c = self.cluster
        for _ in range(3 * c.p.election_tick):
            if not c.check.unanswered_reads(c.nodes):
                return
            c.tick += 1
            c.round()
        stuck = c.check.unanswered_reads(c.nodes)
        if stuck:
            raise InvariantViolation(
                "liveness", f"reads never answered by a leader still in office: {stuck[:5]}"
            )


def run(seed: int, nodes: int = 3, steps: int = DEFAULT_STEPS, verbose: int = 0) -> Stats:
    """Simulate one seed; raises InvariantViolation on the first broken property."""
    return Simulation(seed, nodes, steps, verbose).run()
