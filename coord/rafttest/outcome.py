"""What one simulated run ends with: its `Stats` (what happened: a guard against a
simulator that silently stopped injecting faults), or the first broken property as an
`InvariantViolation` that names the seed and the command replaying it with a trace."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_STEPS = 600
"""Ticks of faults and workload per seed before the healing phase."""


class InvariantViolation(AssertionError):
    """A safety or liveness property failed. ``str()`` names the invariant, the seed and the
    command that replays the run with a trace."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(invariant, detail)
        self.invariant = invariant
        self.detail = detail
        self.seed: int | None = None
        self.nodes: int | None = None
        self.steps: int = DEFAULT_STEPS
        self.where = ""

    def replay_command(self) -> str:
        cmd = f"python -m coord.rafttest --seed {self.seed} --nodes {self.nodes}"
        if self.steps != DEFAULT_STEPS:
            cmd += f" --steps {self.steps}"
        return cmd + " -v"

    def __str__(self) -> str:
        head = f"invariant violated: {self.invariant}"
        if self.seed is not None:
            head += f" (seed {self.seed}, {self.nodes} nodes, {self.where})"
            return f"{head}\n  {self.detail}\n  replay: {self.replay_command()}"
        return f"{head}\n  {self.detail}"


@dataclass(slots=True)
class Stats:
    seed: int
    nodes: int
    ticks: int = 0
    leaders: int = 0
    committed: int = 0
    proposed: int = 0
    acked: int = 0
    reads: int = 0
    reads_served: int = 0
    crashes: int = 0
    torn_readies: int = 0
    snapshots_sent: int = 0
    snapshots_restored: int = 0
    conf_changes: int = 0
    transfers: int = 0
    partitions: int = 0
    delivered: int = 0
    dropped: int = 0
