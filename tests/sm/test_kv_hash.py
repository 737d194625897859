"""HashKV (coord/sm/kv_hash.py): members that applied the same log agree at every
revision, whatever their own head; a member that diverged by one value does not; a
restored snapshot hashes the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.kv_hash import hash_now
from coord.sm.machine import CoordMachine

keys = st.sampled_from([b"a", b"b", b"c"])
ops = st.lists(st.one_of(
    st.builds(lambda k, v: c.Put(k, v), keys, st.binary(max_size=3)),
    st.builds(lambda k: c.DeleteRange(k), keys),
    st.builds(lambda k: c.DeleteRange(k, b"\0"), keys),
), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(ops, st.data())
def test_a_revision_hashes_the_same_later_and_on_a_restored_member(cmds, data):
    m = CoordMachine()
    at: dict[int, int] = {}
    for cmd in cmds:
        m.execute(cmd)
        at[m.revision] = hash_now(m.kv.view())
    for rev, expected in at.items():
        if rev:  # a revision hashes later as it did when it was the head
            assert hash_now(m.kv.view(), rev) == expected, rev
    if m.revision:  # a compaction changes the number (as etcd's), alike on every member
        compact = data.draw(st.integers(0, m.revision), label="compact")
        if compact:
            m.execute(c.Compact(compact))
    restored = CoordMachine()
    restored.restore(m.snapshot())
    for rev in range(max(1, m.kv.compact_revision), m.revision + 1):
        assert hash_now(restored.kv.view(), rev) == hash_now(m.kv.view(), rev), rev


def test_one_differing_value_differs_and_order_of_writes_to_other_keys_does_not():
    a, b, planted = CoordMachine(), CoordMachine(), CoordMachine()
    for m, last in ((a, b"z"), (b, b"z"), (planted, b"Z")):
        m.execute(c.Put(b"x", b"1"))
        m.execute(c.Put(b"y", last))
    assert hash_now(a.kv.view()) == hash_now(b.kv.view())
    assert hash_now(planted.kv.view()) != hash_now(a.kv.view())
