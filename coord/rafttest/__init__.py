"""A deterministic cluster simulator for the Raft core (coord.raft): Jepsen in a for-loop.

Runs N members (3 or 5, plus one spare id that membership changes may add) through the
`RawNode` API only, over a simulated network and simulated disks, under a seeded workload
and seeded faults, and checks Raft's safety properties after every single step. There is
no wall clock, no thread and no I/O: every choice comes from one ``random.Random(seed)``,
so a seed replays exactly (``python -m coord.rafttest --seed S --nodes N -v``)."""

from coord.rafttest.outcome import InvariantViolation, Stats
from coord.rafttest.simulation import Simulation, run

__all__ = ["InvariantViolation", "Simulation", "Stats", "run"]
