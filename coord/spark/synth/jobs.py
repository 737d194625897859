"""Fenced Spark batch jobs as a client of a synthesized coord (`coord.history.synth`).

`SparkJobs` is a synth `Workload`: a few jobs, each published version after version,
whose drivers and task attempts propose to the synthesized cluster exactly what
`coord.spark.datasource` and `coord.spark.attempt` send a real one, and whose writes go
to one sink's fence and log (`FenceLog`). A driver starts a run (a session takes the
job's run slot over, at its holder's generation, and closes); each task checks the run
(a read), opens its session, owns `p<partition>` at its holder's generation, inits the
partition's producer and reads the owner back, then announces its token in the sink,
sends its batches and seals; the driver checks its run inside the publish (the
revision it read is logged with the publish), records the version by compare-and-set
and closes the winners' sessions. Reads are the state machine's queries: they commit
nothing, as a linearizable read commits nothing. Nothing is written as a history row
by hand: every row is the state machine's answer to a proposed command.

Faults, each as a real job meets them:
  - a retried task (`retry`): the executor is lost mid-write, Spark starts another
    attempt while the first still runs; the new claim severs the old attempt's session
    and its announcement fences it, so the old attempt's next batch is refused;
  - a speculative copy that loses (`speculative`): the original seals first; the copy's
    claim severs it in coord, but its announcement finds the partition sealed by an
    attempt of its run and version, so it writes nothing and closes its session; the
    original is published;
  - a driver that dies before publishing (`restart`): its sealed attempts' sessions and
    one attempt still writing are left to expire (the executor cut off from coord but
    not from the database goes on); the job is submitted again, its new run fences the
    old one, and the straggler's next batch is refused as an older run's.
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from coord.client.recipes.fence import FencedWriteError, Token
from coord.history.synth import Cluster
from coord.sm import commands as c
from coord.sm.records import Claim, Grant
from coord.spark.attempt import (
    CLAIM_TRIES,
    RUN,
    LostClaimError,
    RunCheck,
    group_of,
    producer_key,
    resource_of,
)
from coord.spark.jobs import version_key
from coord.spark.synth.fence_log import FenceLog

__all__ = ["Faults", "Made", "Shape", "SparkJobs"]

TTL_MS = 10_000  # a task's and a driver's session (coord.spark's default ttl)
BATCH_ROWS = 10_000  # rows per Arrow batch (Spark's arrow.maxRecordsPerBatch default)

Steps = Generator[c.Command, Any, Any]
"""A driver's or a task's work: yields each command it proposes, is sent its result,
and returns what it made."""


@dataclass(frozen=True)
class Faults:
    """Chances per task attempt (retry, speculative) and per run (restart)."""

    retry: float = 0.03
    speculative: float = 0.02
    restart: float = 0.05


@dataclass(frozen=True)
class Shape:
    """The jobs (name, partitions), the batches a task sends (1..max_batches), the
    faults, and the share of the cluster's ticks the jobs take (the rest go to synth's
    own clients)."""

    jobs: tuple[tuple[str, int], ...] = (
        ("orders-daily", 16),
        ("clicks-hourly", 32),
        ("payments-daily", 8),
        ("audit-nightly", 12),
    )
    max_batches: int = 120
    faults: Faults = Faults()
    share: float = 0.5

    def __post_init__(self) -> None:
        # the jobs must get ticks and have a partition to write, or the sink log never
        # reaches its rows and synth would run on without end
        if not self.jobs or any(partitions < 1 for _, partitions in self.jobs):
            raise ValueError("a shape needs at least one job, each with a partition")
        if not 0 < self.share <= 1:
            raise ValueError(f"share must be in (0, 1], not {self.share}")
        if self.max_batches < 1:
            raise ValueError("max_batches must be >= 1")


@dataclass
class _Attempt:
    session: int
    token: Token
    rows: int = 0


@dataclass
class Made:
    """What the jobs did: counts that say the faults happened."""

    runs: int = 0
    published: int = 0
    attempts: int = 0
    retries: int = 0
    speculative_losers: int = 0
    restarts: int = 0


@dataclass
class SparkJobs:
    """The workload (see the module docstring): runs of each job until its sink's log
    holds `sink_rows` rows, then every run in flight finishes."""

    log: FenceLog
    sink_rows: int
    seed: int = 0
    shape: Shape = Shape()
    made: Made = field(default_factory=Made)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"spark-jobs-{self.seed}")
        self.cluster: Cluster | None = None
        self._published = dict.fromkeys((name for name, _ in self.shape.jobs), 0)
        self._runs: dict[str, Steps] = {}
        self._answers: dict[str, Any] = {}
        self._rids = 0

    @property
    def done(self) -> bool:
        return self.log.rows >= self.sink_rows and not self._runs

    def step(self, cluster: Cluster) -> bool:
        self.cluster = cluster
        if self.rng.random() >= self.shape.share:
            return False
        job, partitions = self.rng.choice(self.shape.jobs)
        steps = self._runs.get(job)
        if steps is None:
            if self.log.rows >= self.sink_rows:
                return False
            steps = self._runs[job] = self._run(job, partitions)
        try:
            command = steps.send(self._answers.pop(job, None))
        except StopIteration:
            del self._runs[job]
            return False
        self._answers[job] = cluster.propose(command)
        return True

    # -- what coord sees -------------------------------------------------------------------
    def _rid(self) -> str:
        self._rids += 1
        return f"spark-{self._rids}"

    @property
    def _machine(self) -> Any:
        assert self.cluster is not None
        return self.cluster.machine

    def _take_over(self, session: int, group: str, resource: str) -> Steps:
        """`attempt._take_over`: own `resource` at its holder's generation; the grant."""
        for _ in range(CLAIM_TRIES):
            held = self._machine.query(c.GetOwner(group, resource))
            result = yield c.Own(
                session, group, (Claim(resource, max(held.generation, 1)),), self._rid()
            )
            for severed in result.severed:
                self.cluster.forget(severed)  # synth's own bookkeeping of ended sessions
            if result.ok:
                grant: Grant = next(g for g in result.grants if g.resource == resource)
                return grant
        raise LostClaimError(f"{group}/{resource}: still contested after {CLAIM_TRIES} takeovers")

    def _start_run(self, job: str) -> Steps:
        """`attempt.start_run`: the new run's generation."""
        session = (yield c.OpenSession(f"spark {job} run", TTL_MS, False, self._rid())).session_id
        grant = yield from self._take_over(session, group_of(job), RUN)
        yield c.CloseSession(session, self._rid())
        self.made.runs += 1
        return grant.generation

    def _run_is(self, job: str, run: int) -> bool:
        """`attempt.check_run`'s read: `run` is still the job's newest."""
        return self._machine.query(c.GetOwner(group_of(job), RUN)).generation == run

    def _claim(self, job: str, partition: int, run: int, version: int) -> Steps:
        """`attempt.claim`: a new attempt's session and token."""
        group, resource = group_of(job), resource_of(partition)
        session = (
            yield c.OpenSession(f"spark {job} p{partition}", TTL_MS, False, self._rid())
        ).session_id
        grant = yield from self._take_over(session, group, resource)
        producer = yield c.InitProducer(producer_key(job, partition), self._rid())
        now = self._machine.query(c.GetOwner(group, resource))
        if now.owner != session or now.generation != grant.generation:
            raise LostClaimError(f"{job!r} partition {partition}: taken over while claiming")
        self.made.attempts += 1
        return _Attempt(
            session,
            Token(
                grant.generation, producer.pid, producer.generation, run, version, grant.revision
            ),
        )

    # -- what the sink sees ----------------------------------------------------------------
    @property
    def _now(self) -> int:
        assert self.cluster is not None
        return self.cluster.now_ms

    def _sizes(self) -> list[int]:
        """One task's batches: full ones and a last partial one."""
        n = self.rng.randint(1, self.shape.max_batches)
        return [BATCH_ROWS] * (n - 1) + [self.rng.randint(1, BATCH_ROWS)]

    def _send(
        self, job: str, partition: int, a: _Attempt, sizes: list[int], first_seq: int = 1
    ) -> None:
        """Batches of `a` from sequence `first_seq`, as `write_partition` sends them."""
        self.log.write(job, partition, a.token, first_seq, sizes, self._now)
        a.rows += sum(sizes)

    def _write_all(self, job: str, partition: int, a: _Attempt, sizes: list[int]) -> None:
        """`write_partition` of an attempt that holds the partition throughout: its
        batches and its seal."""
        self._send(job, partition, a, sizes)
        self.log.seal(job, partition, a.token, len(sizes) + 1, a.rows, self._now)

    def _zombie_refused(self, job: str, partition: int, a: _Attempt, seq: int, size: int) -> None:
        """A fenced attempt's next batch: the sink must refuse it."""
        try:
            self.log.write(job, partition, a.token, seq, [size], self._now)
        except FencedWriteError:
            return
        raise AssertionError(f"the sink accepted {a.token} seq {seq} of {job}/{partition}")

    # -- a run ---------------------------------------------------------------------------
    def _task(self, job: str, partition: int, run: int, version: int) -> Steps:
        """One partition's task and what Spark commits for it: the winning attempt
        (None if the run was fenced before the task claimed)."""
        if not self._run_is(job, run):
            return None
        sizes, roll, faults = self._sizes(), self.rng.random(), self.shape.faults
        a = yield from self._claim(job, partition, run, version)
        self.log.begin(job, partition, a.token, self._now)
        if roll < faults.retry:  # lost mid-write; the retry fences it
            k = self.rng.randrange(len(sizes))
            self._send(job, partition, a, sizes[:k])
            b = yield from self._claim(job, partition, run, version)
            self.log.begin(job, partition, b.token, self._now)
            self._zombie_refused(job, partition, a, k + 1, sizes[k])
            self._write_all(job, partition, b, sizes)
            self.made.retries += 1
            return b
        self._write_all(job, partition, a, sizes)
        if roll < faults.retry + faults.speculative:  # a copy that loses to a's seal
            b = yield from self._claim(job, partition, run, version)
            sealed = self.log.begin(job, partition, b.token, self._now)
            assert sealed is not None and sealed.token == a.token
            yield c.CloseSession(b.session, self._rid())
            self.made.speculative_losers += 1
        return a

    def _dying_driver(self, job: str, partitions: int, run: int, version: int) -> Steps:
        """Some of the run's tasks, then its driver dies: the attempts' sessions are no
        longer kept alive, and the last task is cut off mid-write. (the straggler's
        partition, attempt and the size of its next batch)"""
        done = self.rng.randrange(partitions)
        left: list[_Attempt] = []
        for partition in range(done):
            a = yield from self._claim(job, partition, run, version)
            self.log.begin(job, partition, a.token, self._now)
            self._write_all(job, partition, a, self._sizes())
            left.append(a)
        straggler = yield from self._claim(job, done, run, version)
        self.log.begin(job, done, straggler.token, self._now)
        sizes = self._sizes()
        k = self.rng.randrange(len(sizes))
        self._send(job, done, straggler, sizes[:k])
        for a in [*left, straggler]:
            self.cluster.crash(a.session, TTL_MS)
        self.made.restarts += 1
        return done, straggler, k + 1, sizes[k]

    def _run(self, job: str, partitions: int) -> Steps:
        """The next version of `job`, from `writer()` to the commit."""
        version = self._published[job] + 1
        run = yield from self._start_run(job)
        straggler = None
        if self.rng.random() < self.shape.faults.restart:
            straggler = yield from self._dying_driver(job, partitions, run, version)
            run = yield from self._start_run(job)  # the job is submitted again
        winners: dict[int, _Attempt] = {}
        for partition in range(partitions):
            a = yield from self._task(job, partition, run, version)
            if a is None:
                return
            winners[partition] = a
            if straggler is not None and straggler[0] == partition:
                self._zombie_refused(job, *straggler)
        yield from self._publish(job, run, version, winners)

    def _publish(self, job: str, run: int, version: int, winners: dict[int, _Attempt]) -> Steps:
        """`datasource.publish`: the run check inside the sink's publish, the version
        recorded in coord, the winners' sessions ended (a severed one's close fails,
        as it does for the real driver)."""
        if not self._run_is(job, run):
            return
        checked = RunCheck(job, run, self._machine.revision)
        self.log.publish(
            job, {p: (a.token, a.rows) for p, a in winners.items()}, checked, self._now
        )
        key = version_key(job).encode()
        kvs = self._machine.query(c.Range(key)).kvs
        yield c.Txn.compare_and_set(
            key, kvs[0].version if kvs else 0, str(version).encode(), self._rid()
        )
        for a in winners.values():
            yield c.CloseSession(a.session, self._rid())
        self._published[job] = version
        self.made.published += 1
