"""Producer ids: blocks, fixed-lifetime leases, and fenced producer identities.

All pids come from one monotonic sequence starting at 1 (pid 0 means "not idempotent" in
Kafka's idempotent-producer specification), so a pid is never issued twice. Leases
follow that specification: every pid has the same lifetime from issue, so pids expire in
issue order and the live ones fit a fixed-size circular buffer searched by binary
search. Lifetimes run on the machine's `ElapsedClock` (leader time counted within each
leader's term, coord/sm/elapsed.py), so a leader whose wall clock is hours off cannot
expire a lease early; a lease outlives its lifetime by the elections it lives through. A
lease's `expire_ms` is kept on that clock; answers carry it as leader wall time (the
proposing leader's time plus what is left). The lease's random starting generation is
drawn by the leader and carried in the command, so apply stays deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from coord.sm import limits
from coord.sm.canonical_json import INT64_MAX, Lazy, decoder, from_plain
from coord.sm.dedup import RecentRequests
from coord.sm.errors import (
    INVALID_ARGUMENT,
    PID_CAPACITY_EXHAUSTED,
    PRODUCER_FENCED,
    TOO_LARGE,
    UNKNOWN_PID,
    UNKNOWN_PRODUCER,
    CommandError,
)
from coord.sm.ledger import Ledger, operation
from coord.sm.results import LeasePidResult, PidBlockResult, ProducerResult, Result

DEFAULT_PID_LIFETIME_MS = 3_600_000
DEFAULT_PID_CAPACITY = 65_536
DEFAULT_REQUEST_CAPACITY = 10_000  # remembered (kind, requester, request_id) -> answer


class PidLease(NamedTuple):
    pid: int
    generation: int
    expire_ms: int
    topic: str
    partition: int


class PidRing:
    """A fixed-capacity circular buffer of leases in issue order — which is also pid
    order and expiry order, so both lookups are binary searches."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("pid capacity must be >= 1")
        self.capacity = capacity
        self._slots: list[PidLease | None] = [None] * capacity
        self._head = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def _at(self, i: int) -> PidLease:
        lease = self._slots[(self._head + i) % self.capacity]
        assert lease is not None
        return lease

    def __iter__(self) -> Iterator[PidLease]:
        return (self._at(i) for i in range(self._count))

    def in_order(self) -> list[PidLease]:
        """The leases, oldest first, by list slicing (a snapshot's capture: milliseconds
        at a million, where iterating takes a Python step per lease)."""
        slots = self._slots[self._head:] + self._slots[:self._head]
        return slots[:self._count]  # type: ignore[return-value]

    def last(self) -> PidLease | None:
        return self._at(self._count - 1) if self._count else None

    def append(self, lease: PidLease) -> None:
        if self._count == self.capacity:
            raise OverflowError("pid ring is full")
        self._slots[(self._head + self._count) % self.capacity] = lease
        self._count += 1

    def expired_count(self, now_ms: int) -> int:
        """How many leases at the head have expired (expire_ms <= now_ms)."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._at(mid).expire_ms <= now_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def drop_expired(self, now_ms: int) -> int:
        n = self.expired_count(now_ms)
        for _ in range(n):
            self._slots[self._head] = None
            self._head = (self._head + 1) % self.capacity
        self._count -= n
        return n

    def find(self, pid: int) -> PidLease | None:
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._at(mid).pid < pid:
                lo = mid + 1
            else:
                hi = mid
        if lo < self._count and self._at(lo).pid == pid:
            return self._at(lo)
        return None


def _check_str(v: Any, what: str, max_bytes: int, empty_ok: bool = False) -> None:
    if type(v) is not str or (not v and not empty_ok):
        raise CommandError(INVALID_ARGUMENT, f"{what} must be a {'' if empty_ok else 'non-empty '}"
                           "str")
    if limits.utf8_len(v) > max_bytes:
        raise CommandError(TOO_LARGE, f"{what} longer than {max_bytes} bytes")


def _check_int(v: Any, what: str, low: int, high: int) -> None:
    if type(v) is not int or not low <= v <= high:
        raise CommandError(INVALID_ARGUMENT, f"{what} must be an int in [{low}, {high}], got "
                           f"{v!r:.40}")


class PidAllocator:
    def __init__(
        self,
        ledger: Ledger | None = None,
        *,
        pid_lifetime_ms: int = DEFAULT_PID_LIFETIME_MS,
        pid_capacity: int = DEFAULT_PID_CAPACITY,
        request_capacity: int = DEFAULT_REQUEST_CAPACITY,
    ) -> None:
        if pid_lifetime_ms < 1:
            raise ValueError("pid lifetime must be >= 1 ms")
        self.ledger = Ledger() if ledger is None else ledger
        self.pid_lifetime_ms = pid_lifetime_ms
        self.next_pid = 1
        self.ring = PidRing(pid_capacity)
        self.producers: dict[str, tuple[int, int]] = {}  # producer_key -> (pid, generation)
        # Blocks, leases and producer generations handed out since this allocator was
        # built. Not state (not in the snapshot), as `Ledger.changes`: an inspection
        # stream compares it with itself to learn that the tables moved without walking
        # them (a restore builds a new allocator).
        self.changes = 0
        # (kind, requester or producer key, request_id) -> (a, b, revision)
        self._recent: RecentRequests[tuple[str, str, str], tuple[int, int, int]] = (
            RecentRequests(request_capacity))

    def _take(self, size: int) -> int:
        if self.next_pid + size - 1 > INT64_MAX:
            raise CommandError(PID_CAPACITY_EXHAUSTED, "the pid sequence is exhausted")
        start = self.next_pid
        self.next_pid += size
        return start

    @operation(PidBlockResult)
    def allocate_pid_block(self, requester: str, size: int, request_id: str = "") -> PidBlockResult:
        """[start, start + size) from the one sequence; a retry with the same
        (requester, request_id) gets the same block."""
        _check_str(requester, "requester", limits.MAX_NAME_BYTES, empty_ok=True)
        _check_int(size, "size", 1, limits.MAX_PID_BLOCK)
        _check_str(request_id, "request_id", limits.MAX_REQUEST_ID_BYTES, empty_ok=True)
        key = ("block", requester, request_id)
        if request_id and (hit := self._recent.get(key)) is not None:
            return PidBlockResult(revision=hit[2], start=hit[0], size=hit[1])
        if self.next_pid + size - 1 > INT64_MAX:
            raise CommandError(PID_CAPACITY_EXHAUSTED, "the pid sequence is exhausted")
        revision = self.ledger.touch()
        start = self._take(size)
        self.changes += 1
        if request_id:
            self._recent.put(key, (start, size, revision))
        return PidBlockResult(revision=revision, start=start, size=size)

    @operation(LeasePidResult)
    def lease_pid(
        self, topic: str, partition: int, pid: int = -1, *, now_ms: int,
        wall_ms: int | None = None, random_generation: int = 0,
    ) -> LeasePidResult:
        """pid -1: lease a new pid at `random_generation`, sequence 0, expiring one
        lifetime from now. pid > 0: that pid's live lease (no renewal: fixed lifetime).
        `now_ms` is the elapsed clock's time, `wall_ms` the leader's, which the answer's
        `expire_ms` is given in (None: the elapsed clock's)."""
        if wall_ms is None:
            wall_ms = now_ms
        _check_str(topic, "topic", limits.MAX_NAME_BYTES)
        _check_int(partition, "partition", 0, limits.MAX_PARTITION)
        _check_int(now_ms, "now_ms", 0, INT64_MAX - self.pid_lifetime_ms)
        _check_int(wall_ms, "wall_ms", 0, INT64_MAX - self.pid_lifetime_ms)
        if pid != -1:
            _check_int(pid, "pid", 1, INT64_MAX)
            lease = self.ring.find(pid)
            if lease is None or lease.expire_ms <= now_ms:
                raise CommandError(UNKNOWN_PID, f"pid {pid} has no live lease (expired, or "
                                   "never leased)")
            return LeasePidResult(revision=self.ledger.head, pid=lease.pid,
                                  generation=lease.generation,
                                  expire_ms=wall_ms + lease.expire_ms - now_ms)
        _check_int(random_generation, "random_generation", 0, limits.MAX_PID_GENERATION)
        if len(self.ring) - self.ring.expired_count(now_ms) >= self.ring.capacity:
            raise CommandError(PID_CAPACITY_EXHAUSTED, f"all {self.ring.capacity} pid leases "
                               "are live; retry after the oldest expires")
        if self.next_pid > INT64_MAX:
            raise CommandError(PID_CAPACITY_EXHAUSTED, "the pid sequence is exhausted")
        revision = self.ledger.touch()
        self.ring.drop_expired(now_ms)
        last = self.ring.last()
        # Never expire before an earlier lease (the ring's order is expiry order).
        expire_ms = max(now_ms + self.pid_lifetime_ms, last.expire_ms if last else 0)
        lease = PidLease(self._take(1), random_generation, expire_ms, topic, partition)
        self.ring.append(lease)
        self.changes += 1
        return LeasePidResult(revision=revision, pid=lease.pid, generation=lease.generation,
                              sequence_number=0, expire_ms=wall_ms + expire_ms - now_ms)

    @operation(Result)
    def set_capacity(self, capacity: int, *, now_ms: int) -> Result:
        """A ring of `capacity` holding the live leases, in order (the expired ones are
        dropped now, as the next lease would drop them)."""
        _check_int(capacity, "capacity", 1, limits.MAX_PID_CAPACITY)
        live = len(self.ring) - self.ring.expired_count(now_ms)
        if capacity < live:
            raise CommandError(INVALID_ARGUMENT, f"{live} pid leases are live; the capacity "
                               f"cannot go below that (asked for {capacity})")
        self.ledger.mark()
        self.ring.drop_expired(now_ms)
        ring = PidRing(capacity)
        for lease in self.ring:
            ring.append(lease)
        self.ring = ring
        self.changes += 1
        return Result(revision=self.ledger.revision)

    def live_leases(self, now_ms: int) -> list[PidLease]:
        return list(self.ring)[self.ring.expired_count(now_ms):]

    @operation(ProducerResult)
    def init_producer(self, producer_key: str, request_id: str = "") -> ProducerResult:
        """First call: a new pid at generation 0. Later calls: the same pid, generation + 1,
        fencing every older instance (a new pid at 0 once the generation is exhausted)."""
        _check_str(producer_key, "producer_key", limits.MAX_NAME_BYTES)
        _check_str(request_id, "request_id", limits.MAX_REQUEST_ID_BYTES, empty_ok=True)
        key = ("producer", producer_key, request_id)
        if request_id and (hit := self._recent.get(key)) is not None:
            return ProducerResult(revision=hit[2], pid=hit[0], generation=hit[1])
        current = self.producers.get(producer_key)
        if self.next_pid > INT64_MAX:
            raise CommandError(PID_CAPACITY_EXHAUSTED, "the pid sequence is exhausted")
        revision = self.ledger.touch()
        if current is None or current[1] >= limits.MAX_PID_GENERATION:
            pid, generation = self._take(1), 0
        else:
            pid, generation = current[0], current[1] + 1
        self.producers[producer_key] = (pid, generation)
        self.changes += 1
        if request_id:
            self._recent.put(key, (pid, generation, revision))
        return ProducerResult(revision=revision, pid=pid, generation=generation)

    @operation(ProducerResult)
    def check_producer(self, producer_key: str, pid: int, generation: int) -> ProducerResult:
        """OK iff (pid, generation) is the producer's current identity; an older one is
        PRODUCER_FENCED. The result always carries the current identity."""
        _check_str(producer_key, "producer_key", limits.MAX_NAME_BYTES)
        _check_int(pid, "pid", 1, INT64_MAX)
        _check_int(generation, "generation", 0, limits.MAX_PID_GENERATION)
        current = self.producers.get(producer_key)
        if current is None:
            raise CommandError(UNKNOWN_PRODUCER, f"no producer {producer_key!r:.60}")
        result = dict(revision=self.ledger.head, pid=current[0], generation=current[1])
        if (pid, generation) == current:
            return ProducerResult(**result)
        if (pid, generation) < current:
            return ProducerResult(error=PRODUCER_FENCED, message=f"pid {pid} generation "
                                  f"{generation} was fenced by generation {current[1]}",
                                  **result)
        return ProducerResult(error=INVALID_ARGUMENT, message=f"pid {pid} generation "
                              f"{generation} was never issued to {producer_key!r:.60}", **result)

    def recent_blocks(self) -> list[tuple[str, int, int, int]]:
        """(requester, start, size, revision) of the remembered blocks (those asked for
        with a request id, bounded), oldest first: for inspection."""
        return [(who, a, b, rev) for (kind, who, _rid), (a, b, rev) in self._recent.items()
                if kind == "block"]

    # -- snapshot ------------------------------------------------------------------------

    def to_state(self) -> dict:
        return {**self._state_but_leases(), "leases": [list(lease) for lease in self.ring]}

    def capture(self) -> dict:
        """`to_state`, cheaply, for a snapshot taken on the event loop: the live leases as
        a copy of the ring's slots in order (list slicing, milliseconds at 1M leases),
        made lists a slice at a time as `canonical_json.iter_dumps` reaches them. Building every
        lease's list at capture held the loop long enough, at a million leases, for the
        leader to lose its quorum."""
        return {**self._state_but_leases(), "leases": Lazy(self.ring.in_order(), list)}

    def _state_but_leases(self) -> dict:
        return {
            "next_pid": self.next_pid,
            "producers": [[k, *v] for k, v in sorted(self.producers.items())],
            "recent": [[*k, *v] for k, v in self._recent.items()],
        }

    def load_state(self, state: dict) -> None:
        lease_of, recent_of = decoder(PidLease), decoder(tuple[str, str, str, int, int, int])
        producer_of = decoder(tuple[str, int, int])
        next_pid = from_plain(int, state["next_pid"])
        leases = [lease_of(x) for x in state["leases"]]
        if len(leases) > self.ring.capacity:
            raise ValueError("snapshot holds more pid leases than the ring's capacity")
        pairs = zip(leases, leases[1:], strict=False)
        if any(a.pid >= b.pid or a.expire_ms > b.expire_ms for a, b in pairs):
            raise ValueError("pid leases out of order")
        self.next_pid = next_pid
        self.ring = PidRing(self.ring.capacity)
        for lease in leases:
            self.ring.append(lease)
        self.producers = {k: (p, g) for k, p, g in (producer_of(x) for x in state["producers"])}
        self._recent = RecentRequests(self._recent.capacity)
        for kind, who, rid, a, b, revision in (recent_of(x) for x in state["recent"]):
            self._recent.put((kind, who, rid), (a, b, revision))

    def describe(self) -> dict:
        return {"next_pid": self.next_pid, "pid_leases": len(self.ring),
                "pid_capacity": self.ring.capacity,
                "producers": len(self.producers)}
