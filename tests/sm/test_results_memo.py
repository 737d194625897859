"""A member decodes the results its own machine just encoded by handing back the object
they were made from; every other bytes decode as before, and the memory is bounded."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm import results
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim


def test_the_bytes_an_apply_returns_decode_to_the_result_they_were_made_from():
    m = CoordMachine()
    sid = c.decode_result(m.apply(1, 1, 0, c.encode_command(c.OpenSession("s", 5_000))))
    data = m.apply(2, 1, 0, c.encode_command(
        c.Own(sid.session_id, "g", tuple(Claim(f"r{i}", 0) for i in range(50)))))
    copy = bytes(bytearray(data))  # equal bytes, another object: as from the network
    parsed = c.decode_result(copy)
    fast = c.decode_result(data)
    assert fast == parsed and type(fast) is type(parsed) and fast is not parsed
    assert type(fast.grants) is tuple and all(type(g) is type(parsed.grants[0])
                                              for g in fast.grants)
    again = c.decode_result(data)  # a hit is taken out: the second decode parses
    assert again == fast and again is not fast
    made = results.Result(error="X", message="m", revision=3)
    assert results.decode_result(results.encode_result(made)) is made


def test_the_memory_of_encoded_results_is_bounded():
    memo = results._just_encoded
    for i in range(memo.MAX_ENTRIES + 50):
        results.encode_result(results.Result(revision=i))
    assert len(memo._by_id) <= memo.MAX_ENTRIES
    big = results.Result(message="x" * (1 << 20))
    for _ in range(12):
        results.encode_result(big)
    assert memo._bytes <= memo.MAX_BYTES
    assert memo._bytes == sum(len(d) for d, _ in memo._by_id.values())
