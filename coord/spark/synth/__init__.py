"""A synthesized history with fenced Spark jobs in it, and their sink's log.

`SinkLogSynth(out, sink_rows, seed).rows()` gives the rows of a history made as
`coord.history.synth` makes one, by the real state machine, with `jobs.SparkJobs` as one
more client: fenced batch jobs whose drivers and tasks claim, init producers and publish
in coord as a real job does, and whose sink judges their writes by the real fence
(`fence_log.FenceLog`). Their sink's log is exported beside it (`out/sink_log.parquet`
and `out/refusals.parquet`, as `coord history export-sink-log` writes them) part by part
while the rows are made, so `coord audit HIST --sink-log OUT` can check a log of any
size made in bounded memory. The same seed gives the same history and log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from coord.history.rows import Row
from coord.history.synth import synthesize
from coord.spark.sinks.log import LogFiles
from coord.spark.synth.fence_log import PART_ROWS, FenceLog
from coord.spark.synth.jobs import Faults, Made, Shape, SparkJobs

__all__ = ["Faults", "Made", "Shape", "SinkLogSynth"]

JOBS = Shape()
"""The jobs a synthesized sink log comes from unless told otherwise."""


class SinkLogSynth:
    """A history whose Spark jobs write until their sink's log holds at least
    `sink_rows` rows (and every run then in flight has finished), at least `commands`
    entries long; the log's files go to `out`, committed once `rows()` is exhausted."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        sink_rows: int,
        seed: int = 0,
        shape: Shape = JOBS,
        commands: int = 0,
        part_rows: int = PART_ROWS,
    ) -> None:
        if sink_rows < 1:
            raise ValueError("sink_rows must be >= 1")
        self.out, self.sink_rows, self.seed = Path(out), sink_rows, seed
        self.shape, self.commands, self.part_rows = shape, commands, part_rows
        self.jobs: SparkJobs | None = None

    def rows(self) -> Iterator[Row]:
        """The history's rows, in order; the sink log's files appear at the end."""
        with LogFiles(self.out) as files:
            log = FenceLog(files, self.part_rows)
            self.jobs = SparkJobs(log, self.sink_rows, self.seed, self.shape)
            yield from synthesize(self.commands, self.seed, self.jobs)
            log.flush()
            files.commit()

    @property
    def log_rows(self) -> int:
        """Sink log rows made so far."""
        return self.jobs.log.rows if self.jobs else 0

    def figures(self) -> dict[str, Any]:
        """What was made: the log's rows and refusals, and the jobs' counts."""
        made = self.jobs.made if self.jobs else Made()
        return {
            "sink_rows": self.log_rows,
            "refusals": self.jobs.log.refused if self.jobs else 0,
            **asdict(made),
        }
