"""The request-id memory (`coord.sm.dedup`): weighed lazily when given a bound, it keeps
and evicts exactly the entries it would keep weighing each on arrival, in the machine
too (the snapshot bytes are the same)."""

from __future__ import annotations

import random

from coord.sm import commands as c
from coord.sm.dedup import RecentRequests
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim


def _pair(capacity: int, max_weight: int, slack: random.Random):
    """An eager memory and a lazy one (bound: the weight plus up to 40 more), and how
    many times the lazy one weighed a value."""
    weighed = [0]

    def weigh(v: bytes) -> int:
        weighed[0] += 1
        return len(v)

    eager: RecentRequests[str, bytes] = RecentRequests(capacity, max_weight, len)
    lazy: RecentRequests[str, bytes] = RecentRequests(
        capacity, max_weight, weigh, lambda v: len(v) + slack.randrange(41))
    return eager, lazy, weighed


def test_a_lazily_weighed_memory_keeps_what_one_weighed_on_arrival_keeps():
    rng = random.Random(7)
    for capacity, max_weight in [(5, 0), (50, 300), (8, 120), (1000, 2_000), (3, 1)]:
        eager, lazy, _ = _pair(capacity, max_weight, random.Random(capacity))
        for i in range(2_000):
            key = f"r{rng.randrange(400)}"  # some keys come again
            value = b"x" * rng.choice((0, 1, 5, 30, 80, 200))
            eager.put(key, value)
            lazy.put(key, value)
            assert list(lazy.items()) == list(eager.items()), (capacity, max_weight, i)
            if i % 97 == 0:
                assert lazy.weight == eager.weight
        assert lazy.weight == eager.weight and len(lazy) == len(eager)


def test_entries_that_leave_by_count_are_never_weighed():
    eager, lazy, weighed = _pair(100, 1 << 20, random.Random(1))
    for i in range(10_000):
        lazy.put(f"r{i}", b"v" * 50)
        eager.put(f"r{i}", b"v" * 50)
    assert weighed[0] == 0
    assert lazy.weight == eager.weight == 100 * 50 and weighed[0] == 100


def _commands(rng: random.Random):
    """Writes with request ids whose results vary in size (txns of many puts, owns of
    many claims, single puts), and a retry now and then."""
    sid = 1
    yield c.OpenSession("s", 60_000, request_id="open")
    for i in range(400):
        roll = rng.random()
        rid = f"r{rng.randrange(i + 1)}" if roll < 0.1 else f"r{i}"
        if roll < 0.4:
            yield c.Put(b"k%d" % rng.randrange(50), b"v" * rng.randrange(100), request_id=rid,
                        prev_kv=rng.random() < 0.5)
        elif roll < 0.7:
            ops = tuple(c.Put(b"t%d" % k, b"w") for k in range(rng.randrange(1, 30)))
            yield c.Txn((), ops, (), request_id=rid)
        else:
            claims = tuple(Claim(f"p{k}", 0) for k in range(rng.randrange(1, 20)))
            yield c.Own(sid, "g", claims, request_id=rid)


def test_the_machines_memory_and_snapshot_are_those_of_weighing_each_answer_at_once():
    lazy, eager = (CoordMachine(request_capacity=60, request_bytes=3_000) for _ in range(2))
    eager.recent = RecentRequests(60, 3_000, lambda v: len(v[1].data))  # no bound
    held = []
    for cmd in _commands(random.Random(3)):
        data = c.encode_command(cmd)
        assert lazy.apply(0, 1, 5, data).data == eager.apply(0, 1, 5, data).data
        assert [k for k, _ in lazy.recent.items()] == [k for k, _ in eager.recent.items()]
        held.append(len(lazy.recent))
    assert min(held[100:]) < 30  # the bytes, not the count, bounded it
    assert lazy.snapshot() == eager.snapshot()
    assert lazy.recent.weight == eager.recent.weight
