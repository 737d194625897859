"""Producer ids: blocks and their retries, leases and their expiry order, producers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.canonical_json import dumps, iter_dumps
from coord.sm.errors import (
    INVALID_ARGUMENT,
    PID_CAPACITY_EXHAUSTED,
    PRODUCER_FENCED,
    UNKNOWN_PID,
    UNKNOWN_PRODUCER,
)
from coord.sm.machine import CoordMachine
from coord.sm.pids import PidAllocator, PidLease, PidRing


def test_blocks_come_from_one_monotonic_sequence():
    p = PidAllocator()
    a = p.allocate_pid_block("broker-1", 100)
    b = p.allocate_pid_block("broker-2", 1)
    lease = p.lease_pid("t", 0, now_ms=0)
    d = p.allocate_pid_block("broker-1", 100_000)
    assert (a.start, a.size) == (1, 100)
    assert (b.start, b.size) == (101, 1)
    assert lease.pid == 102
    assert d.start == 103 and p.next_pid == 100_103
    assert d.revision == 5 == p.ledger.revision  # from 1, the empty state's revision


def test_retry_with_same_request_id_returns_the_same_block():
    p = PidAllocator()
    first = p.allocate_pid_block("broker-1", 10, request_id="req-1")
    again = p.allocate_pid_block("broker-1", 10, request_id="req-1")
    assert again == first and p.ledger.revision == 2
    other = p.allocate_pid_block("broker-2", 10, request_id="req-1")  # another requester
    assert other.start == 11
    no_id = [p.allocate_pid_block("broker-1", 10).start for _ in range(2)]
    assert no_id == [21, 31]  # an empty request id is never deduplicated


def test_request_table_is_bounded():
    p = PidAllocator(request_capacity=3)
    for i in range(5):
        p.allocate_pid_block("b", 1, request_id=f"r{i}")
    assert len(p._recent) == 3
    assert p.allocate_pid_block("b", 1, request_id="r4").start == 5  # still remembered
    assert p.allocate_pid_block("b", 1, request_id="r0").start == 6  # forgotten: new block


def test_machine_level_retry_returns_same_block_and_same_bytes():
    m = CoordMachine()
    cmd = c.AllocatePidBlock("broker-1", 500, request_id="uuid-1")
    first = m.apply(1, 1, 10, c.encode_command(cmd))
    again = m.apply(2, 1, 20, c.encode_command(cmd))
    assert again.data == first.data and m.revision == 2
    assert first.value.start == 1
    assert m.execute(c.AllocatePidBlock("broker-1", 500)).start == 501


def test_block_size_bounds():
    p = PidAllocator()
    for size in (0, -1, 100_001, True):
        assert p.allocate_pid_block("b", size).error == INVALID_ARGUMENT
    assert p.ledger.revision == 1 and p.next_pid == 1  # still the empty state's


def test_lease_new_pid_uses_the_leaders_generation_and_fixed_lifetime():
    p = PidAllocator(pid_lifetime_ms=1_000)
    r = p.lease_pid("orders", 3, now_ms=5_000, random_generation=123456)
    assert r.ok and (r.pid, r.generation, r.sequence_number, r.expire_ms) == (1, 123456, 0, 6_000)
    looked = p.lease_pid("orders", 3, pid=1, now_ms=5_500)
    assert (looked.pid, looked.generation, looked.expire_ms) == (1, 123456, 6_000)
    assert p.ledger.revision == 2  # a lookup changes nothing
    assert p.lease_pid("orders", 3, pid=1, now_ms=6_000).error == UNKNOWN_PID
    assert p.lease_pid("orders", 3, pid=77, now_ms=0).error == UNKNOWN_PID
    for bad in (dict(pid=0), dict(pid=-2), dict(random_generation=-1),
                dict(random_generation=1 << 31)):
        assert p.lease_pid("orders", 3, now_ms=0, **bad).error == INVALID_ARGUMENT
    assert p.lease_pid("", 3, now_ms=0).error == INVALID_ARGUMENT
    assert p.lease_pid("t", -1, now_ms=0).error == INVALID_ARGUMENT


def test_leases_never_expire_before_earlier_ones_even_if_the_clock_goes_back():
    p = PidAllocator(pid_lifetime_ms=1_000)
    a = p.lease_pid("t", 0, now_ms=10_000)
    b = p.lease_pid("t", 0, now_ms=9_000)  # a new leader with a slower clock
    assert b.expire_ms >= a.expire_ms


def test_ring_has_fixed_capacity_and_frees_expired_leases():
    p = PidAllocator(pid_lifetime_ms=1_000, pid_capacity=3)
    for t in (0, 10, 20):
        assert p.lease_pid("t", 0, now_ms=t).ok
    full = p.lease_pid("t", 0, now_ms=500)
    assert full.error == PID_CAPACITY_EXHAUSTED and p.next_pid == 4
    r = p.lease_pid("t", 0, now_ms=1_000)  # the first lease expired at 1_000
    assert r.ok and r.pid == 4
    assert [x.pid for x in p.ring] == [2, 3, 4] and len(p.ring._slots) == 3


def test_the_capacity_is_set_by_a_command_and_never_below_the_live_leases():
    m = CoordMachine(pid_capacity=3, pid_lifetime_ms=60_000)
    for _ in range(3):
        assert m.execute(c.LeasePid("t", 0)).ok
    assert m.execute(c.LeasePid("t", 0)).error == PID_CAPACITY_EXHAUSTED
    before = m.snapshot()
    for bad in (2, 0, -1, (1 << 22) + 1):
        refused = m.execute(c.SetPidCapacity(bad))
        assert refused.error == INVALID_ARGUMENT and refused.message
    assert m.snapshot() == before  # a refusal changes nothing
    assert m.execute(c.SetPidCapacity(5, request_id="grow")).ok
    assert [m.execute(c.LeasePid("t", 0)).ok for _ in range(3)] == [True, True, False]
    assert [x.pid for x in m.pids.ring] == [1, 2, 3, 4, 5]
    other = CoordMachine()  # default capacity: the snapshot's config wins
    other.restore(m.snapshot())
    assert other.pids.ring.capacity == 5 and other.describe()["pid_capacity"] == 5
    assert other.snapshot() == m.snapshot()
    # wraps kept in order: lease past the end of a ring that has dropped its head
    later = CoordMachine(pid_capacity=2, pid_lifetime_ms=1_000)
    later.execute(c.LeasePid("t", 0), 0)
    later.execute(c.LeasePid("t", 0), 500)
    assert later.execute(c.SetPidCapacity(4), 1_200).ok  # the first expired at 1_000
    assert [x.pid for x in later.pids.ring] == [2]


def test_a_capture_of_a_wrapped_ring_writes_what_to_state_writes():
    p = PidAllocator(pid_lifetime_ms=1_000, pid_capacity=4)
    for t in (0, 10, 20, 30, 1_005, 1_015):  # the first two expire, the ring wraps
        assert p.lease_pid("t", t, now_ms=t).ok
    assert p.ring._head != 0 and [x.pid for x in p.ring.in_order()] == [3, 4, 5, 6]
    assert "".join(iter_dumps(p.capture())) == dumps(p.to_state()).decode()


def test_ring_binary_search_across_the_wrap():
    ring = PidRing(4)
    for pid in range(1, 5):
        ring.append(PidLease(pid * 10, 0, pid * 100, "t", 0))
    ring.drop_expired(200)
    ring.append(PidLease(50, 0, 500, "t", 0))
    ring.append(PidLease(60, 0, 600, "t", 0))
    assert [x.pid for x in ring] == [30, 40, 50, 60]
    assert ring.find(50).expire_ms == 500 and ring.find(30).pid == 30
    assert ring.find(10) is None and ring.find(45) is None and ring.find(70) is None
    assert ring.expired_count(450) == 2


def test_init_producer_bumps_generation_and_fences():
    p = PidAllocator()
    first = p.init_producer("app-1")
    assert (first.pid, first.generation) == (1, 0)
    second = p.init_producer("app-1")
    assert (second.pid, second.generation) == (1, 1)
    assert p.init_producer("app-2").pid == 2
    assert p.check_producer("app-1", 1, 1).ok
    fenced = p.check_producer("app-1", 1, 0)
    assert fenced.error == PRODUCER_FENCED and fenced.generation == 1
    assert p.check_producer("app-1", 1, 2).error == INVALID_ARGUMENT
    assert p.check_producer("nobody", 1, 0).error == UNKNOWN_PRODUCER
    retry = p.init_producer("app-1", request_id="boot-7")
    assert p.init_producer("app-1", request_id="boot-7") == retry  # a retry must not fence
    assert retry.generation == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("block"), st.integers(1, 1000)),
    st.tuples(st.just("lease"), st.integers(0, 400)),  # clock step (may be 0)
    st.tuples(st.just("producer"), st.sampled_from(["p1", "p2"])),
), max_size=60), st.integers(1, 8))
def test_pid_properties(steps, capacity):
    """Blocks and leases are disjoint and increasing; leases expire in issue order."""
    p = PidAllocator(pid_lifetime_ms=1_000, pid_capacity=capacity)
    now = 0
    issued: list[tuple[int, int]] = []  # [start, end) in issue order
    leases: list[tuple[int, int]] = []  # (pid, expire_ms) in issue order
    for kind, arg in steps:
        if kind == "block":
            r = p.allocate_pid_block("b", arg)
            issued.append((r.start, r.start + r.size))
        elif kind == "lease":
            now += arg
            r = p.lease_pid("t", 0, now_ms=now, random_generation=arg)
            if r.ok:
                issued.append((r.pid, r.pid + 1))
                leases.append((r.pid, r.expire_ms))
            else:
                assert r.error == PID_CAPACITY_EXHAUSTED
        else:
            r = p.init_producer(arg)
            if r.generation == 0:
                issued.append((r.pid, r.pid + 1))
        for (_, end), (start, _) in zip(issued, issued[1:], strict=False):
            assert end <= start
        # expiry in issue order: the live leases are exactly a suffix of those issued
        live = [pid for pid, _ in leases if p.lease_pid("t", 0, pid, now_ms=now).ok]
        expected = [pid for pid, exp in leases if exp > now]
        assert live == expected == [pid for pid, _ in leases[len(leases) - len(live):]]
        assert len(p.ring) <= capacity
