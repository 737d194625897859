"""The fence a sink applies to every write, whoever sends it (the fenced Spark writer's
sinks, coord.spark.sinks, and any other).

A task attempt writes as `Token(generation, pid, epoch)`: the ownership generation coord
granted it for (job, partition) and the producer identity `InitProducer(job/partition)`
gave it (same pid for every attempt, epoch + 1 each time, so each new attempt fences
every earlier one). Its batches carry sequences 0, 1, 2, ...; the last one seals the
partition. The sink keeps one fence row per (job, partition) and judges each write
against it inside the transaction that stores the write, so a zombie attempt (paused,
partitioned away, speculatively duplicated) cannot land a row once a newer attempt has
written: a lower ownership generation is refused, and the pid/epoch/sequence rules are
`coord.client.recipes.sequence.SequenceValidator`'s (the restart policy: a newer epoch
starts at sequence 0), not a second copy of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from coord.client.recipes.sequence import (
    ACCEPT,
    DUPLICATE_SEQUENCE,
    FENCED_GENERATION,
    SequenceValidator,
    Verdict,
)

__all__ = ["FenceRow", "FencedWriteError", "Token", "judge", "refused"]


@dataclass(frozen=True, slots=True)
class Token:
    """Who a write claims to come from."""

    generation: int  # coord ownership generation of (job, partition)
    pid: int  # coord producer id of job/partition
    epoch: int  # producer generation: + 1 per attempt

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class FenceRow:
    """What the sink stored last for one (job, partition)."""

    generation: int
    pid: int
    epoch: int
    last_sequence: int
    sealed: bool = False  # the attempt sent its final (seal) write
    rows: int = 0  # rows stored under (pid, epoch), for the seal check


class FencedWriteError(RuntimeError):
    """The sink refused a write: a newer attempt holds the partition (or the write is out
    of sequence). `verdict` says which rule refused it."""

    def __init__(self, verdict: Verdict, job: str, partition: int, token: Token, seq: int,
                 stored: FenceRow | None) -> None:
        held = (f"held by generation {stored.generation} epoch {stored.epoch} "
                f"(last sequence {stored.last_sequence})" if stored else "never written")
        super().__init__(f"{verdict}: write to {job!r} partition {partition} as generation "
                         f"{token.generation} pid {token.pid} epoch {token.epoch} sequence "
                         f"{seq} refused; the partition is {held}")
        self.verdict = verdict
        self.token = token
        self.sequence = seq
        self.stored = stored


def judge(stored: FenceRow | None, token: Token, seq: int) -> Verdict:
    """The verdict for a write of sequence `seq` as `token` against the stored fence row.

    ACCEPT: store it and move the row to (token, seq). DUPLICATE_SEQUENCE: already stored
    (the sender may treat it as done). Anything else is a refusal. A different pid (coord
    gives a new one once an epoch counter is exhausted) is a new producer: it may take
    over only with a higher ownership generation."""
    if stored is not None and token.generation < stored.generation:
        return FENCED_GENERATION
    validator = SequenceValidator(restart_on_new_generation=True)
    if stored is not None:
        if token.pid != stored.pid:
            if token.generation == stored.generation:
                return FENCED_GENERATION
        else:
            if token.generation > stored.generation and token.epoch <= stored.epoch:
                return FENCED_GENERATION  # a newer owner always comes with a newer epoch
            validator.remember(stored.pid, 0, stored.epoch, stored.last_sequence)
    return validator.check(token.pid, 0, token.epoch, seq)


def refused(verdict: Verdict) -> bool:
    """True for a verdict that stores nothing and must fail the sender."""
    return verdict not in (ACCEPT, DUPLICATE_SEQUENCE)
