"""What every fenced sink offers, and the checks they share.

A sink stores an attempt's batches as they arrive (judged by
`coord.client.recipes.fence`), keeps them invisible until the driver publishes the job
version, and makes exactly the winning attempts' rows visible in one atomic step that
also records the version, so a re-run of a published version publishes nothing. Refused
writes are logged in the sink (`refusals()`), each with the token it was judged against:
the evidence that a zombie tried, and of which newer attempt refused it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from coord.client.recipes.fence import FenceRow, PartitionSealedError, RunFencedError, Token
from coord.spark.attempt import RunCheck

__all__ = ["REFUSAL_COLUMNS", "PublishError", "Refusal", "RunGuard", "SealError", "Sink",
           "check_winner"]

RunGuard = Callable[[], RunCheck]
"""The driver's check that its run is still the newest (`coord.spark.attempt.check_run`
bound to its client, job and run): RunFencedError if not, else what it saw."""


class PublishError(RuntimeError):
    """The driver asked to publish a partition whose stored attempt is not the winner it
    names (not sealed, another token, or a row count that does not match)."""


class SealError(RuntimeError):
    """An attempt's seal names a row count the sink did not store (a lost batch)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A write the fence refused: who sent it (`token`, coord's grant revision
    included) and what the fence judged it against (`held`: the token of the attempt
    whose fence row the partition had, with its run and coord's revision of its grant;
    None if the partition was never written), so a refusal names the newer holder and
    where coord's history has its grant."""

    job: str
    partition: int
    token: Token
    sequence: int
    verdict: str
    held: Token | None = None

    def as_row(self, at_ms: int) -> dict[str, Any]:
        """The refusal as the sink stores it (REFUSAL_COLUMNS)."""
        held = self.held.as_dict() if self.held else dict.fromkeys(TOKEN_FIELDS)
        return {"job": self.job, "partition": self.partition, **self.token.as_dict(),
                "sequence": self.sequence, "verdict": self.verdict, "at_ms": at_ms,
                **{f"held_{k}": v for k, v in held.items()}}

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Refusal:
        held = None if row["held_generation"] is None else Token(
            **{k: row[f"held_{k}"] for k in TOKEN_FIELDS})
        return cls(row["job"], row["partition"], Token(**{k: row[k] for k in TOKEN_FIELDS}),
                   row["sequence"], row["verdict"], held)


TOKEN_FIELDS = tuple(Token.__slots__)
REFUSAL_COLUMNS = ("job", "partition", *TOKEN_FIELDS, "sequence", "verdict", "at_ms",
                   *(f"held_{k}" for k in TOKEN_FIELDS))
"""How a sink stores a refusal (`Refusal.as_row`): the refused token, the sequence and
verdict, and the held token it was judged against."""


def check_winner(job: str, partition: int, stored: FenceRow | None, token: Token,
                 rows: int) -> None:
    """PublishError unless the fence row shows `token` sealed with `rows` rows;
    RunFencedError if a newer run's attempt holds the partition."""
    if stored is None:
        raise PublishError(f"{job!r} partition {partition}: nothing was written")
    held = stored.token
    if held.run > token.run:
        raise RunFencedError(job, token.run, held.run)
    if held != token:
        raise PublishError(f"{job!r} partition {partition}: the sink holds {held}, "
                           f"not the winner {token}")
    if not stored.sealed:
        raise PublishError(f"{job!r} partition {partition}: attempt {token} never sealed")
    if stored.rows != rows:
        raise PublishError(f"{job!r} partition {partition}: {stored.rows} rows stored, "
                           f"the winner reported {rows}")


class Sink(ABC):
    """One output (a SQLite table, a Parquet directory), opened in any process."""

    @abstractmethod
    def append(self, job: str, partition: int, token: Token, seq: int,
               batch: pa.RecordBatch) -> None:
        """Store one batch, invisible until published; FencedWriteError if refused."""

    def begin(self, job: str, partition: int, token: Token) -> FenceRow | None:
        """A new attempt announces its token (sequence 0, no rows) as soon as coord has
        granted it: from then on the sink refuses every write of an earlier attempt,
        also before the new one sends a row (a straggler woken meanwhile, a speculative
        copy's original). Its rows follow from sequence 1. If an earlier attempt of the
        same run and version has already sealed the partition, nothing changes and its
        fence row is returned: that attempt is the winner, this one writes nothing."""
        try:
            self.append(job, partition, token, 0, pa.record_batch([], schema=pa.schema([])))
        except PartitionSealedError as sealed:
            return sealed.stored
        return None

    @abstractmethod
    def seal(self, job: str, partition: int, token: Token, seq: int, rows: int) -> None:
        """The attempt's last write: it sent `rows` rows in sequences below `seq`."""

    @abstractmethod
    def starting_run(self) -> AbstractContextManager[None]:
        """Held while the driver starts a run in coord (`coord.spark.attempt.start_run`).
        A publish holds the same lock from its run check to its commit, so a run starts
        either before the check, which then fails, or after the commit: never between
        them, where neither the check nor the fence rows of the new run (not written
        yet) could refuse the older run's publish."""

    @abstractmethod
    def publish(self, job: str, version: int, winners: dict[int, tuple[Token, int]],
                check: RunGuard | None = None) -> bool:
        """Make the winners' rows visible and record `version`, atomically; False (and
        nothing changes) if `version` is not above the recorded one. `winners` maps
        partition -> (token, rows). `check`, the driver's run check, is called inside
        the publish under `starting_run`'s lock (its RunFencedError publishes nothing);
        what it saw is logged with each publish row (the audit places the publish in
        coord's order of runs by it)."""

    @abstractmethod
    def committed_version(self, job: str) -> int | None:
        """The last version published for `job` (None: never)."""

    @abstractmethod
    def discard(self, job: str, attempts: dict[int, Token]) -> None:
        """Drop the rows of these attempts (partition -> token) unless published: an
        aborted job's. Attempts of other runs are left alone."""

    @abstractmethod
    def fence(self, job: str, partition: int) -> FenceRow | None:
        """The stored fence row."""

    @abstractmethod
    def refusals(self, job: str | None = None) -> list[Refusal]:
        """Every refused write (of `job`), oldest first."""

    @abstractmethod
    def log(self) -> pa.Table:
        """Every accepted append, seal and publish, in the order the sink accepted them
        (`coord.spark.sinks.log.LOG_SCHEMA`): what `coord audit --sink-log` checks."""

    @abstractmethod
    def append_plain(self, batch: pa.RecordBatch) -> None:
        """An unfenced write straight to the visible output (the baseline a plain
        `df.write` gets, for side-by-side tests and benchmarks)."""

    @abstractmethod
    def read(self) -> pa.Table:
        """Everything visible: published rows (or plainly written ones)."""

    @abstractmethod
    def close(self) -> None:
        """Release what the sink holds open."""
