"""What the chaos workers do, through the real client library (`coord.client.Client`),
each op recorded as invoke then ok/fail/info (coord.chaos.recorder).

- register: read / write / cas on a few hot keys; the keys rotate every
  `ops_per_key` ops (Jepsen's independent keys), so each key's oplog stays small
  enough for the linearizability search; unique values make anomalies sharp.
- set: every write a fresh key; the final read must hold every acknowledged one.
- own: sessions without keepalives own contended resources and write to a fenced
  sink with their (generation, revision) token, sometimes after their session's TTL
  has passed (a zombie the sink must refuse once a newer owner wrote).
- pid: PID blocks, PID leases, producer inits (epoch bumps) and producer checks with
  possibly fenced identities.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from coord.chaos.keys import RotatingKeys
from coord.chaos.recorder import Process
from coord.chaos.sink import FencedSink
from coord.client import (
    Client,
    CompactedError,
    CoordError,
    Grant,
    InvalidArgumentError,
    OwnedByHigherGenerationError,
    ProducerFencedError,
    ReadOnlyError,
    SessionGoneError,
)

PREFIX = "chaos/"

DEFINITE = (InvalidArgumentError, OwnedByHigherGenerationError, ProducerFencedError,
            ReadOnlyError, SessionGoneError, CompactedError)
"""Errors that say the request did not take effect. Anything else on a write (a
timeout, UNAVAILABLE, NO_QUORUM, a dropped connection) leaves its outcome unknown."""


def _why(e: BaseException) -> str:
    return getattr(e, "reason", "") or type(e).__name__


def write_failed(proc: Process, e: BaseException) -> None:
    """Record a write's error: fail if the error proves it did nothing, else info."""
    if isinstance(e, DEFINITE):
        proc.fail(_why(e))
    else:
        proc.info(_why(e))


class Workload:
    name = ""

    def step(self, proc: Process, client: Client, rng: random.Random) -> None:
        raise NotImplementedError

    def finish(self, proc: Process, client: Client) -> None:
        """Final reads once the faults are healed."""


class Register(Workload):
    name = "register"

    def __init__(self, hot_keys: int = 3, ops_per_key: int = 250,
                 serializable: bool = False) -> None:
        """`serializable`: reads from the member's local state without a ReadIndex (a
        planted bug: such reads may be stale, and the checker must say so)."""
        self.serializable = serializable
        self.keys = RotatingKeys(f"{PREFIX}reg/", hot_keys, ops_per_key)
        self._values = itertools.count(1)
        self._last_seen: dict[tuple[int, str], Any] = {}

    def step(self, proc: Process, client: Client, rng: random.Random) -> None:
        key = self.keys.next(rng)
        f = rng.choices(("read", "write", "cas"), (2, 1, 1))[0]
        if f == "read":
            self.read(proc, client, key)
        elif f == "write":
            value = next(self._values)
            proc.invoke("write", key, value)
            try:
                client.put(key, str(value))
            except CoordError as e:
                write_failed(proc, e)
                return
            proc.ok(value)
        else:
            old = self._last_seen.get((proc.worker, key))
            new = next(self._values)
            proc.invoke("cas", key, [old, new])
            txn = client.txn()
            txn = txn.if_version(key, "=", 0) if old is None else \
                txn.if_value(key, "=", str(old))
            try:
                done = txn.then_put(key, str(new)).commit().succeeded
            except CoordError as e:
                write_failed(proc, e)
                return
            if done:
                proc.ok([old, new])
            else:
                proc.fail("compare failed", [old, new])

    def read(self, proc: Process, client: Client, key: str) -> None:
        proc.invoke("read", key)
        try:
            res = client.range(key, serializable=self.serializable)
        except CoordError as e:
            proc.fail(_why(e))
            return
        value = int(res.kvs[0].value) if res.kvs else None
        self._last_seen[(proc.worker, key)] = value
        flags = {"read_only": True} if res.header.read_only else {}
        proc.ok(value, revision=res.header.revision, endpoint=res.header.member, **flags)

    def finish(self, proc: Process, client: Client) -> None:
        for key in sorted(self.keys.used):
            self.read(proc, client, key)


class SetAdds(Workload):
    name = "set"

    def __init__(self) -> None:
        self._n = itertools.count()

    def step(self, proc: Process, client: Client, rng: random.Random) -> None:
        n = next(self._n)
        key, value = f"{PREFIX}set/{n:08d}", f"v{n}"
        proc.invoke("add", key, value)
        try:
            client.put(key, value)
        except CoordError as e:
            write_failed(proc, e)
            return
        proc.ok(value)

    def finish(self, proc: Process, client: Client) -> None:
        prefix = f"{PREFIX}set/"
        proc.invoke("read_all", prefix)
        try:
            kvs = client.range(prefix=prefix).kvs
        except CoordError as e:
            proc.fail(_why(e))
            return
        proc.ok([[kv.key.decode(), kv.value.decode()] for kv in kvs])


@dataclass
class Ownership(Workload):
    name = "own"
    group = "chaos"
    sink: FencedSink
    resources: int = 3
    ttl: float = 1.0

    def step(self, proc: Process, client: Client, rng: random.Random) -> None:
        """One owner's life: open a session (no keepalive), claim, write with the
        token, maybe stall past the TTL (a GC pause: then the session should be gone),
        sometimes far past it, and write again, close or let it expire."""
        resource = f"r{rng.randrange(self.resources)}"
        proc.invoke("open_session", None, self.ttl)
        try:
            session = client.open_session("chaos", self.ttl).session_id
        except CoordError as e:
            write_failed(proc, e)
            time.sleep(0.1)
            return
        proc.ok(self.ttl, session=session)
        common = {"group": self.group, "resource": resource, "session": session}
        grant = self._own(proc, client, common)
        if grant is None:
            time.sleep(rng.uniform(0.05, 0.3))
            return
        for n in range(rng.randint(1, 3)):
            if n or rng.random() < 0.2:
                stall = rng.random()
                if stall < 0.7:
                    time.sleep(rng.uniform(0.05, 0.2))
                else:  # a zombie: its session should expire meanwhile
                    time.sleep(self.ttl * (rng.uniform(1.2, 2.5) if stall < 0.95 else 8))
                    self._own(proc, client, common)  # alive still? (a re-claim is idempotent)
            self.write(proc, common, grant, n)
        if rng.random() < 0.5:
            with contextlib.suppress(CoordError):
                client.close_session(session)

    def write(self, proc: Process, common: dict, grant: Grant, n: int) -> None:
        """The owner's `n`th write to the sink, with its grant's token."""
        value = f"{common['session']}:{n}"
        proc.invoke("write_fenced", None, value, generation=grant.generation,
                    revision=grant.revision, **common)
        accepted, detail = self.sink.write(self.group, common["resource"], grant.generation,
                                           grant.revision)
        if accepted:
            proc.ok(value, sequence=detail)
        else:
            proc.fail(str(detail))

    def _own(self, proc: Process, client: Client, common: dict) -> Grant | None:
        proc.invoke("own", None, None, **common)
        try:
            result = client.own(common["session"], self.group, common["resource"])
        except CoordError as e:
            write_failed(proc, e)
            return None
        grant = next((g for g in result.grants if g.resource == common["resource"]), None)
        if grant is None:
            proc.fail("not granted")
            return None
        proc.ok(None, generation=grant.generation, revision=grant.revision)
        return grant


class Producers(Workload):
    name = "pid"

    def __init__(self, producers: int = 3) -> None:
        self.producers = producers
        # Every identity handed out per producer key: a check sends the newest one or,
        # a third of the time, an older one (a zombie producer the cluster must refuse).
        self._known: dict[str, list[tuple[int, int]]] = {}
        self._lock = threading.Lock()

    def step(self, proc: Process, client: Client, rng: random.Random) -> None:
        f = rng.choices(("allocate_pid_block", "lease_pid", "init_producer",
                         "check_producer"), (2, 1, 2, 3))[0]
        key = f"chaos-producer-{rng.randrange(self.producers)}"
        if f == "check_producer":
            if key not in self._known:
                f = "init_producer"
            else:
                self._check(proc, client, key, rng)
                return
        try:
            if f == "allocate_pid_block":
                proc.invoke(f, None, None, requester=f"chaos-{proc.id}")
                block = client.allocate_pid_block(f"chaos-{proc.id}", rng.randint(1, 20))
                proc.ok([block.start, block.start + block.size])
            elif f == "lease_pid":
                partition = rng.randrange(4)
                proc.invoke(f, None, None, topic="chaos", partition=partition)
                lease = client.lease_pid("chaos", partition)
                proc.ok(None, pid=lease.pid, epoch=lease.generation)
            else:
                proc.invoke(f, key, None)
                producer = client.init_producer(key)
                with self._lock:
                    self._known.setdefault(key, []).append((producer.pid, producer.generation))
                proc.ok(None, pid=producer.pid, epoch=producer.generation)
        except CoordError as e:
            write_failed(proc, e)

    def _check(self, proc: Process, client: Client, key: str, rng: random.Random) -> None:
        with self._lock:
            seen = sorted(self._known[key])
        pid, epoch = seen[-1] if rng.random() < 0.67 else rng.choice(seen)
        proc.invoke("check_producer", key, None, pid=pid, epoch=epoch)
        try:
            client.check_producer(key, pid, epoch)
        except CoordError as e:
            proc.fail(_why(e))
            return
        proc.ok()


WORKLOADS = ("register", "set", "own", "pid", "etcd")
"""etcd: the register workload through the etcd3 package (coord.chaos.etcd_worker)."""


PLANTS = ("serializable-reads", "unfenced-sink", "blind-updates")
"""Known-bad settings a run can plant, to show the checkers catch what they cause
(blind-updates: the etcd worker's, coord.chaos.etcd_k8s)."""


def make_workloads(names: list[str], sink: FencedSink, plant: str = "") -> list[Workload]:
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(WORKLOADS)}")
    if plant and plant not in PLANTS:
        raise ValueError(f"unknown plant {plant!r}; choose from {', '.join(PLANTS)}")
    register = Register(serializable=plant == "serializable-reads")
    made: dict[str, Workload] = {"register": register, "set": SetAdds(),
                                 "own": Ownership(sink), "pid": Producers()}
    return [made[n] for n in names]
