"""A fenced sink's fence rows and log without the sink's rows: what a synthesized Spark
job's sink accepts and refuses, and what it logs of it (`coord.spark.sinks.log`).

Every write is judged against the partition's fence row by the fence every real sink
applies (`coord.client.recipes.fence.judge`, `check_winner` for a publish), and logged
as a real sink logs it: an accepted append (sequence 0 announces the attempt, no rows),
seal or publish is a log row numbered in the order accepted, a refused write a refusal
naming the fence row's token. Only the data rows are missing: nothing reads them.

The log is written out in parts of `part_rows` (`LogFiles`), so a log of millions of
rows is never held whole. An attempt's run of batches is judged at its first write
only: nothing else reaches the partition until the run ends (the caller interleaves
attempts between runs, not inside one), so each later write is the same token's next
sequence, which the fence accepts by its in-order rule; judging each of ten million
writes again would cost more than making them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import pyarrow as pa

from coord.client.recipes.fence import (
    FencedWriteError,
    FenceRow,
    PartitionSealedError,
    Token,
    judge,
    refused,
)
from coord.client.recipes.sequence import ACCEPT
from coord.spark.attempt import RunCheck
from coord.spark.sinks.base import Refusal, SealError, check_winner
from coord.spark.sinks.log import LOG_SCHEMA, LogFiles

__all__ = ["FenceLog"]

PART_ROWS = 100_000
"""Log rows held before they are written out (with their refusals)."""


class FenceLog:
    """One sink's fence rows, its log and its refusals, streamed into `files`."""

    def __init__(self, files: LogFiles, part_rows: int = PART_ROWS) -> None:
        self.files = files
        self.part_rows = part_rows
        self.rows = 0  # log rows so far
        self.refused = 0  # refusals so far
        self._fence: dict[tuple[str, int], FenceRow] = {}
        self._columns: dict[str, list] = {name: [] for name in LOG_SCHEMA.names}
        self._refusals: list[Refusal] = []

    def _admit(self, job: str, partition: int, token: Token, seq: int) -> bool:
        """Judge one write against the fence row: True if accepted (the row moved to
        it), False for a duplicate; a refusal is recorded and raised (FencedWriteError),
        and a later copy of a sealed partition raises PartitionSealedError, as in the
        real sinks."""
        stored = self._fence.get((job, partition))
        verdict = judge(stored, token, seq)
        if refused(verdict):
            self._refusals.append(
                Refusal(job, partition, token, seq, str(verdict), stored and stored.token)
            )
            self.refused += 1
            raise FencedWriteError(verdict, job, partition, token, seq, stored)
        if verdict != ACCEPT:  # a duplicate: the real sinks store nothing, log nothing
            return False
        rows = stored.rows if stored is not None and seq else 0  # a new attempt: none yet
        self._fence[job, partition] = FenceRow.of(token, seq, False, rows)
        return True

    def begin(self, job: str, partition: int, token: Token, at_ms: int) -> FenceRow | None:
        """`Sink.begin`: the attempt's announcement (sequence 0). The fence row of the
        attempt that had sealed the partition, if one of the same run and version had
        (this one then writes nothing); None once announced. FencedWriteError if
        refused."""
        try:
            if self._admit(job, partition, token, 0):
                self._log("append", job, partition, token, 0, (0,), at_ms)
        except PartitionSealedError as sealed:
            return sealed.stored
        return None

    def write(
        self,
        job: str,
        partition: int,
        token: Token,
        first_seq: int,
        sizes: Sequence[int],
        at_ms: int,
    ) -> bool:
        """An attempt's batches of `sizes` rows, as sequences first_seq, first_seq + 1,
        ...: FencedWriteError (a refusal recorded, nothing stored) if the fence refuses
        the first (see the module docstring); False if it was a duplicate."""
        if not sizes:
            return True
        if not self._admit(job, partition, token, first_seq):
            return False
        stored = self._fence[job, partition]
        last = first_seq + len(sizes) - 1
        self._fence[job, partition] = FenceRow.of(token, last, False, stored.rows + sum(sizes))
        self._log("append", job, partition, token, first_seq, sizes, at_ms)
        return True

    def seal(self, job: str, partition: int, token: Token, seq: int, rows: int, at_ms: int) -> bool:
        """`Sink.seal`: FencedWriteError if refused, False for a duplicate. SealError if
        the fence row holds another row count (a lost batch: a bug in the caller)."""
        if not self._admit(job, partition, token, seq):
            return False
        stored = self._fence[job, partition].rows
        if stored != rows:
            raise SealError(
                f"{job!r} partition {partition}: the attempt sent {rows} rows, "
                f"the sink stored {stored}"
            )
        self._fence[job, partition] = FenceRow.of(token, seq, True, rows)
        self._log("seal", job, partition, token, seq, (rows,), at_ms)
        return True

    def publish(
        self, job: str, winners: dict[int, tuple[Token, int]], checked: RunCheck, at_ms: int
    ) -> None:
        """`Sink.publish`'s log: a row per winner, in partition order, each checked
        against its fence row (`check_winner`: PublishError or RunFencedError)."""
        for partition, (token, rows) in sorted(winners.items()):
            check_winner(job, partition, self._fence.get((job, partition)), token, rows)
            self._log("publish", job, partition, token, None, (rows,), at_ms, checked)

    def fence(self, job: str, partition: int) -> FenceRow | None:
        return self._fence.get((job, partition))

    def _log(
        self,
        op: str,
        job: str,
        partition: int,
        token: Token,
        first_seq: int | None,
        sizes: Sequence[int],
        at_ms: int,
        checked: RunCheck | None = None,
    ) -> None:
        """Log rows of `op` with `sizes` rows each, sequences from `first_seq` (None: a
        publish, no sequence)."""
        n, cols = len(sizes), self._columns
        cols["id"].extend(range(self.rows + 1, self.rows + n + 1))  # the SQL sinks' ids
        self.rows += n
        for name, value in (
            ("op", op),
            ("job", job),
            ("partition", partition),
            ("generation", token.generation),
            ("revision", token.revision),
            ("pid", token.pid),
            ("epoch", token.epoch),
            ("run", token.run),
            ("version", token.version),
            ("at_ms", at_ms),
            ("run_job", checked and checked.job),
            ("checked_revision", checked and checked.revision),
        ):
            cols[name].extend(repeat(value, n))
        cols["sequence"].extend(
            repeat(None, n) if first_seq is None else range(first_seq, first_seq + n)
        )
        cols["rows"].extend(sizes)
        if len(cols["id"]) >= self.part_rows:
            self.flush()

    def flush(self) -> None:
        """Write out the rows and refusals held."""
        if self._columns["id"] or self._refusals:
            self.files.write(pa.table(self._columns, schema=LOG_SCHEMA), self._refusals)
        self._columns = {name: [] for name in LOG_SCHEMA.names}
        self._refusals = []
