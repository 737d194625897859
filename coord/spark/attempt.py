"""A task attempt's claim on its output partition, in coord.

Every attempt of (job, partition) — first try, retry, speculative copy, a re-run of the
whole job — does the same three steps, in this order:
  1. `own` the resource `p<partition>` in the group `spark/<job>`, taking it over from any
     current holder (claiming at the holder's generation severs it and grants + 1), in
     a session kept alive while the attempt runs;
  2. `InitProducer("spark/<job>/<partition>")`: the same pid, epoch + 1, which fences
     every earlier attempt's producer;
  3. read the owner back: still ours at our generation, or we lost a race and stop.
Step 3 makes the tokens of attempts that go on to write ordered the same way in both
fields (a later owner also initialized later), which is what the sink's fence compares.
So the three wait for each other: an InitProducer sent beside its own could be applied
before it, and a read-back sent beside the InitProducer could be served before it.
The token also carries the driver's run, the job version and coord's revision of the
grant (coord.client.recipes.fence): the audit finds the grant in coord's history by it.

A run is the driver's claim on the job: `start_run` takes the resource `run` in
`spark/<job>` over (a generation above every earlier run's) and lets it go at once — the
generation is what identifies the run, not a live lease. Every task of the run checks
`check_run` before it owns a partition (`claim`'s `run_job`: the check overlaps the
opening of the attempt's session) and the driver checks it inside the sink's
publish, under a lock of the sink that a driver holds while it starts a run
(`coord.spark.datasource.begin_run`), so once a newer run has started, an older one
fails with RunFencedError naming it. The driver's check answers the revision it read
the run slot at; the sink logs it with the publish, so the audit can place the publish
in coord's order of runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from coord.client import (
    TLS,
    Client,
    Grant,
    OwnedByHigherGenerationError,
    Session,
    SessionGoneError,
)
from coord.client.calls import SessionRef
from coord.client.recipes.fence import RunFencedError, Token
from coord.spark.overlap import started

__all__ = ["Claim", "LostClaimError", "RunCheck", "check_run", "claim", "client_for", "group_of",
           "producer_key", "resource_of", "start_run"]

CLAIM_TRIES = 8  # takeovers raced by another attempt before giving up

_clients: dict[tuple[tuple[str, ...], TLS | None], Client] = {}
_clients_lock = threading.Lock()


def client_for(endpoints: tuple[str, ...], tls: TLS | None = None,
               timeout: float = 5.0) -> Client:
    """One Client per endpoint list and TLS per process: Spark reuses Python workers, so
    later tasks in a worker skip the connection set-up (a forked child restarts it
    itself). `tls` None: this process's $COORD_CACERT..., as any client."""
    with _clients_lock:
        client = _clients.get((endpoints, tls))
        if client is None or client.closed:
            client = _clients[endpoints, tls] = Client(list(endpoints), timeout=timeout,
                                                       tls=tls)
        return client


def group_of(job: str) -> str:
    return f"spark/{job}"


def resource_of(partition: int) -> str:
    return f"p{partition}"


def producer_key(job: str, partition: int) -> str:
    return f"spark/{job}/{partition}"


RUN = "run"  # the resource in group_of(job) whose generation numbers the job's runs


class LostClaimError(RuntimeError):
    """Another attempt took the partition while this one was claiming it."""


@dataclass(frozen=True, slots=True)
class Claim:
    job: str
    partition: int
    session_id: int
    token: Token


def _take_over(client: Client, session: SessionRef, group: str, resource: str) -> Grant:
    """Own `resource` in `session`, taking it over from any holder; the grant (its
    generation and coord's revision of it). The first claim is at generation 1, which a
    free resource grants at once (at its last generation + 1, whatever was asked) and a
    holder at generation 1 loses; a holder at a higher generation refuses it naming its
    generation, and the claim at that generation severs it. So taking a free resource —
    every first attempt of a run — costs one request, not a read of the owner before
    it. LostClaimError if it stays contested for CLAIM_TRIES rounds."""
    generation = 1
    for _ in range(CLAIM_TRIES):
        try:
            result = client.own(session, group, {resource: generation})
        except OwnedByHigherGenerationError as e:
            generation = max(e.generation, 1)  # the holder's (never 0: that resets it)
            continue
        return next(g for g in result.grants if g.resource == resource)
    raise LostClaimError(f"{group}/{resource}: still contested after {CLAIM_TRIES} "
                         f"takeovers")


RUN_SESSION_TTL_S = 60.0
"""The run start's session owns the run slot for one request and is closed at once, so
nothing keeps it alive: its TTL only has to outlast that request on a slow machine (a
driver lost meanwhile leaves the slot held until it expires, which delays nobody: the
next run takes it over)."""


def start_run(client: Client, job: str) -> int:
    """A new run of `job`: its generation, above every earlier run's (a run still going
    is fenced by it). The session that takes the slot is opened without keepalives: it
    is closed as soon as the slot is taken (the slot keeps its generation; the next run
    takes + 1)."""
    session = client.open_session(name=f"spark {job} run", ttl=RUN_SESSION_TTL_S)
    try:
        return _take_over(client, session.session_id, group_of(job), RUN).generation
    finally:
        try:
            client.close_session(session.session_id)
        except SessionGoneError:
            pass  # it expired: the slot was let go already


@dataclass(frozen=True, slots=True)
class RunCheck:
    """What a passed `check_run` saw: at `revision` of coord's state, `run` was the
    newest run of `job` (the job whose run slot was read: a streaming query writes under
    another key than its job)."""

    job: str
    run: int
    revision: int


def check_run(client: Client, job: str, run: int) -> RunCheck:
    """RunFencedError if a newer run of `job` than `run` has started; else the revision
    of coord's state at which `run` was the newest (the linearizable read's): the driver
    hands it to the sink's publish, which logs it, and the audit checks that no newer
    run had taken the slot by then (`coord.audit.checks.sink_run`)."""
    read = client.read_owner(group_of(job), RUN)
    if read.owner.generation != run:
        raise RunFencedError(job, run, read.owner.generation)
    return RunCheck(job, run, read.header.revision)


def claim(client: Client, job: str, partition: int, ttl: float = 10.0, run: int = 0,
          version: int = 0, run_job: str | None = None) -> tuple[Session, Claim]:
    """Take (job, partition) for a new attempt of `run` writing `version`: a live
    session (the caller closes or detaches it) and the attempt's token. LostClaimError if
    it is taken over while claiming, or stays contested for CLAIM_TRIES rounds. With
    `run_job`, `run` is first checked to be that job's newest run (`check_run`: a task
    of a superseded run must not take a partition from a newer run's attempt): the
    check's round trip overlaps the session's opening, and nothing is owned before it
    passed (RunFencedError, and the session is closed, if it fails)."""
    group, resource = group_of(job), resource_of(partition)
    checked = started(lambda: check_run(client, run_job, run)) if run_job else None
    session = client.session(name=f"spark {job} p{partition}", ttl=ttl)
    try:
        if checked is not None:
            checked.result()
        grant = _take_over(client, session, group, resource)
        producer = client.init_producer(producer_key(job, partition))
        now = client.get_owner(group, resource)
        if now.session_id != session.id or now.generation != grant.generation:
            raise LostClaimError(f"{job!r} partition {partition}: taken over at "
                                 f"generation {now.generation} while claiming")
        token = Token(grant.generation, producer.pid, producer.generation, run, version,
                      grant.revision)
        return session, Claim(job, partition, session.id, token)
    except BaseException:
        session.close()
        raise
