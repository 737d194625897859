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
The driver checks a winner with `is_current`: coord still shows its generation and its
producer epoch as the newest.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from coord.client import TLS, Client, OwnedByHigherGenerationError, ProducerFencedError, Session
from coord.client.recipes.fence import Token

__all__ = ["Claim", "LostClaimError", "claim", "client_for", "group_of", "is_current",
           "producer_key", "resource_of"]

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


class LostClaimError(RuntimeError):
    """Another attempt took the partition while this one was claiming it."""


@dataclass(frozen=True, slots=True)
class Claim:
    job: str
    partition: int
    session_id: int
    token: Token


def claim(client: Client, job: str, partition: int,
          ttl: float = 10.0) -> tuple[Session, Claim]:
    """Take (job, partition) for a new attempt: a live session (the caller closes or
    detaches it) and the attempt's token. LostClaimError if it is taken over while
    claiming, or stays contested for CLAIM_TRIES rounds."""
    group, resource = group_of(job), resource_of(partition)
    session = client.session(name=f"spark {job} p{partition}", ttl=ttl)
    try:
        for _ in range(CLAIM_TRIES):
            held = client.get_owner(group, resource)
            try:
                result = session.own(group, {resource: max(held.generation, 1)})
            except OwnedByHigherGenerationError:
                continue  # someone else took it over meanwhile: look again
            generation = next(g.generation for g in result.grants if g.resource == resource)
            producer = client.init_producer(producer_key(job, partition))
            now = client.get_owner(group, resource)
            if now.session_id != session.id or now.generation != generation:
                raise LostClaimError(f"{job!r} partition {partition}: taken over at "
                                     f"generation {now.generation} while claiming")
            token = Token(generation, producer.pid, producer.generation)
            return session, Claim(job, partition, session.id, token)
        raise LostClaimError(f"{job!r} partition {partition}: still contested after "
                             f"{CLAIM_TRIES} takeovers")
    except BaseException:
        session.close()
        raise


def is_current(client: Client, job: str, partition: int, token: Token) -> bool:
    """True iff coord still names this token the partition's latest attempt: nobody
    claimed it since (same ownership generation, held by it or freed) and its producer
    epoch is the newest."""
    owner = client.get_owner(group_of(job), resource_of(partition))
    if owner.generation != token.generation:
        return False
    try:
        client.check_producer(producer_key(job, partition), token.pid, token.epoch)
    except ProducerFencedError:
        return False
    return True
