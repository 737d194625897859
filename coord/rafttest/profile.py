"""How hostile a seed's world is: each seed draws its own `Profile` (Raft's timing and
flow-control settings, the network's faults, the workload's and the faults' rates)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(slots=True)
class Profile:
    election_tick: int
    heartbeat_tick: int
    pre_vote: bool
    check_quorum: bool
    max_inflight: int
    max_bytes: int
    loss: float  # per message
    dup: float  # per message
    max_delay: int  # sub-steps
    long_delay: float  # chance that a message is held for several ticks
    skew: float  # chance per tick that a member's clock skips a tick or runs one ahead
    propose: float  # the rest are chances per tick
    read: float
    transfer: float
    compact: float
    compact_gap: int
    conf: float
    partition: float
    crash: float
    downtime: int  # a crashed member restarts within this many ticks
    crash_on_elect: float  # chance that a new leader dies in its next Ready
    crash_on_commit: float  # chance that a leader dies right after its commit advanced
    isolate_proposer: float  # chance that a leader is cut off right after a proposal

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        """Most seeds get a random mix. A few are calm (no faults: the happy path must work
        too) and a few are stormy: leaders keep dying right after being elected or after
        committing, which is where the subtle commit rules (Raft's figure 8) matter."""
        kind = rng.random()
        calm, stormy = kind < 0.12, kind > 0.75
        # PreVote or CheckQuorum (or both) stay on: with neither, a removed member that
        # never learnt of its removal can disrupt the cluster forever (a known Raft trait).
        pre_vote, check_quorum = rng.choice(
            [(True, True), (True, True), (True, False), (False, True)]
        )
        return cls(
            election_tick=10,
            heartbeat_tick=rng.choice([1, 1, 2, 3]),
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            max_inflight=rng.choice([1, 4, 256]),
            max_bytes=48 if stormy else rng.choice([48, 200, 1 << 20]),
            loss=0.0 if calm else rng.choice([0.0, 0.02, 0.05, 0.15]),
            dup=0.0 if calm else rng.choice([0.0, 0.02, 0.1]),
            max_delay=rng.choice([1, 3, 6]),
            long_delay=0.0 if calm else rng.choice([0.0, 0.01, 0.04]),
            skew=0.0 if calm else rng.choice([0.0, 0.0, 0.05, 0.2]),
            propose=rng.choice([0.3, 0.6, 0.9]),
            read=rng.choice([0.05, 0.2, 0.5]),
            transfer=rng.choice([0.0, 0.02, 0.05]),
            compact=rng.choice([0.02, 0.08, 0.2]),
            compact_gap=rng.choice([3, 10, 30]),
            conf=0.0 if stormy else rng.choice([0.0, 0.03, 0.08]),
            partition=0.0 if calm else rng.choice([0.02, 0.05, 0.1]),
            crash=0.0 if calm else rng.choice([0.1, 0.2] if stormy else [0.01, 0.03, 0.06]),
            downtime=2 * 10 if stormy else 4 * 10,
            crash_on_elect=0.0 if calm else rng.choice([0.3, 0.5] if stormy else [0.0, 0.05]),
            crash_on_commit=0.0 if calm else rng.choice([0.2, 0.5] if stormy else [0.0, 0.01]),
            isolate_proposer=0.1 if stormy else 0.0,
        )
