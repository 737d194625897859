"""The fence a sink applies to every write, whoever sends it (the fenced Spark writer's
sinks, coord.spark.sinks, and any other).

A task attempt writes as `Token(generation, pid, epoch)`: the ownership generation coord
granted it for (job, partition) and the producer identity `InitProducer(job/partition)`
gave it (same pid for every attempt, epoch + 1 each time, so each new attempt fences
every earlier one). It also carries the coord revision of that grant (`revision`): the
fence does not judge by it, but the sink stores and logs it, so `coord audit` can find
the grant in coord's exported history and read the attempt's ownership there. Its
batches carry sequences 0, 1, 2, ...; the last one seals the partition. The sink keeps
one fence row per (job, partition) and judges each write against it inside the
transaction that stores the write, so a zombie attempt (paused, partitioned away,
speculatively duplicated) cannot land a row once a newer attempt has written: a lower
ownership generation is refused, and the pid/epoch/sequence rules are
`coord.client.recipes.sequence.SequenceValidator`'s (the restart policy: a newer epoch
starts at sequence 0), not a second copy of them.

Two more fields order attempts of different runs and tell a retry from a new attempt:
`run` (the generation of the driver's run, from coord) and `version` (the job version it
writes). A write from an older run than the stored one is refused, whatever its
generation. An attempt of the same run and version that arrives after the partition was
sealed is not a takeover but a no-op (`check_sealed`): the first attempt to seal wins,
as in Spark's OutputCommitCoordinator; a later copy must write nothing.
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

__all__ = ["FenceRow", "FencedWriteError", "PartitionSealedError", "RunFencedError", "Token",
           "check_sealed", "judge", "refused"]


@dataclass(frozen=True, slots=True)
class Token:
    """Who a write claims to come from."""

    generation: int  # coord ownership generation of (job, partition)
    pid: int  # coord producer id of job/partition
    epoch: int  # producer generation: + 1 per attempt
    run: int = 0  # the driver's run generation (0: a writer without runs)
    version: int = 0  # the job version the attempt writes (streaming: the micro-batch id)
    revision: int = 0  # coord's revision of the ownership grant (0: not from coord)

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
    run: int = 0  # the writing attempt's Token.run, Token.version and Token.revision
    version: int = 0
    revision: int = 0

    @classmethod
    def of(cls, token: Token, last_sequence: int, sealed: bool, rows: int) -> FenceRow:
        return cls(token.generation, token.pid, token.epoch, last_sequence, sealed, rows,
                   token.run, token.version, token.revision)

    @property
    def token(self) -> Token:
        """The token of the attempt that wrote this row."""
        return Token(self.generation, self.pid, self.epoch, self.run, self.version,
                     self.revision)


class FencedWriteError(RuntimeError):
    """The sink refused a write: a newer attempt holds the partition (or the write is out
    of sequence). `verdict` says which rule refused it."""

    def __init__(self, verdict: Verdict, job: str, partition: int, token: Token, seq: int,
                 stored: FenceRow | None) -> None:
        held = (f"held by run {stored.run} generation {stored.generation} epoch "
                f"{stored.epoch} (last sequence {stored.last_sequence})" if stored
                else "never written")
        super().__init__(f"{verdict}: write to {job!r} partition {partition} as run "
                         f"{token.run} generation {token.generation} pid {token.pid} epoch "
                         f"{token.epoch} sequence {seq} refused; the partition is {held}")
        self.verdict = verdict
        self.token = token
        self.sequence = seq
        self.stored = stored


class PartitionSealedError(Exception):
    """A later attempt of the run's version found the partition sealed: the sealed attempt
    is the one published, this one writes nothing (`stored.token` names the winner)."""

    def __init__(self, stored: FenceRow) -> None:
        super().__init__(f"sealed by {stored.token}")
        self.stored = stored


class RunFencedError(RuntimeError):
    """A newer run of the job took it over: this run's writes and its publish are refused,
    so it fails rather than report success for rows it did not publish."""

    def __init__(self, job: str, run: int, newer: int) -> None:
        super().__init__(f"{job!r}: run {run} was superseded by the newer run {newer} of "
                         f"the same job; this run publishes nothing")
        self.run = run
        self.newer = newer


def check_sealed(stored: FenceRow | None, token: Token, seq: int) -> None:
    """PartitionSealedError if `token`'s first write (sequence 0) finds the partition
    sealed by another attempt of the same run and version: first committer wins. Run 0
    (a writer without runs) has no such rule: each new attempt takes over."""
    if (seq == 0 and token.run and stored is not None and stored.sealed
            and stored.token != token
            and (stored.run, stored.version) == (token.run, token.version)):
        raise PartitionSealedError(stored)


def judge(stored: FenceRow | None, token: Token, seq: int) -> Verdict:
    """The verdict for a write of sequence `seq` as `token` against the stored fence row.

    ACCEPT: store it and move the row to (token, seq). DUPLICATE_SEQUENCE: already stored
    (the sender may treat it as done). Anything else is a refusal. A different pid (coord
    gives a new one once an epoch counter is exhausted) is a new producer: it may take
    over only with a higher ownership generation. An older run is refused outright.
    Raises PartitionSealedError instead of judging a later copy of a sealed partition
    (`check_sealed`): it is no refusal, and it stores nothing."""
    check_sealed(stored, token, seq)
    if stored is not None and token.run < stored.run:
        return FENCED_GENERATION
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
