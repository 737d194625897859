"""A deterministic cluster simulator for the Raft core (coord.raft): Jepsen in a for-loop.

Runs N members (3 or 5, plus one spare id that membership changes may add) through the
`RawNode` API only, over a simulated network and simulated disks, and checks Raft's safety
properties after every single step. There is no wall clock, no thread and no I/O: every
choice comes from one ``random.Random(seed)``, so a seed replays exactly
(``python -m coord.rafttest --seed S --nodes N -v``; `cli`).

Each seed draws how hostile its world is (`profile`: calm, mixed or stormy). The network
(`network`) loses, delays, duplicates and reorders messages, and partitions come and heal;
each member (`member`) has a disk that a crash, always a power loss, cuts back to what was
synced, and a state machine whose digest chains every applied entry. The cluster
(`cluster`) handles every member's Ready as a careful driver does and crashes members at
any stage of one; the workload and the faults (`workload`) come each tick; the checker
(`checker`) holds the truth and checks every event against it; a run (`simulation`) ends
with liveness checks after healing, and with its `Stats` or the first `InvariantViolation`
(`outcome`). Leaders are sometimes killed right after winning an election or right after
their commit index moved, which is where the subtle commit rules matter (Raft's figure 8).
"""

from coord.rafttest.outcome import InvariantViolation, Stats
from coord.rafttest.simulation import Simulation, run

__all__ = ["InvariantViolation", "Simulation", "Stats", "run"]
