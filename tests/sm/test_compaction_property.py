"""Compaction never changes what stays readable: after any history of puts, deletes,
txns, sessions and claims, compacting to any revision leaves every read at a retained
revision and every watch starting after the compact revision exactly as before, and
refuses (COMPACTED) every watch starting below it — for KV and ownership alike. The
compactions auto-compaction proposes are these same commands."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.kv_index import HistoryIndex
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim

KEYS = [b"a", b"b", b"c", b"d"]
keys = st.sampled_from(KEYS)
values = st.binary(min_size=0, max_size=3)

kv_ops = st.one_of(
    st.builds(lambda k, v: c.Put(k, v), keys, values),
    st.builds(lambda k: c.DeleteRange(k), keys),
    st.builds(lambda k: c.DeleteRange(k, b"\0"), keys),
    st.builds(lambda k, v, w: c.Txn((), (c.Put(k, v), c.Put(k + b"x", w))), keys, values,
              values),
    st.builds(lambda r: ("claim", r), st.sampled_from(["r1", "r2", "r3"])),
    st.just(("close",)),
)


def _run(ops: list) -> CoordMachine:
    m = CoordMachine(owner_history_limit=1_000)
    session = 0
    for op in ops:
        if isinstance(op, tuple):
            if op[0] == "claim":
                if not session:
                    session = m.execute(c.OpenSession("s", 10_000)).session_id
                m.execute(c.Own(session, "g", (Claim(op[1], 1),)))
            elif session:
                m.execute(c.CloseSession(session))
                session = 0
        else:
            m.execute(op)
    return m


def _view(m: CoordMachine, revision: int) -> tuple:
    """Everything a client can read at `revision` and watch from `revision + 1`."""
    at = m.execute(c.Range(b"\0", b"\0", revision=revision))
    watch = m.execute(c.EventsSince(revision + 1, b"\0", b"\0"))
    owners = m.execute(c.OwnerEventsSince(revision + 1, "g"))
    return at.kvs, watch.error or watch.events, owners.error or owners.events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(kv_ops, min_size=1, max_size=40), st.data())
def test_no_read_at_a_retained_revision_changes(ops, data):
    m = _run(ops)
    head = m.revision
    if head == 0:
        return
    target = data.draw(st.integers(1, head), label="compact to")
    before = {r: _view(m, r) for r in range(target, head + 1)}
    assert m.execute(c.Compact(target)).error == ""
    for r in range(target, head + 1):
        assert _view(m, r) == before[r], f"reading at {r} changed after Compact({target})"
    for r in range(1, target):
        assert m.execute(c.Range(b"\0", b"\0", revision=r)).error == "COMPACTED"
        assert m.execute(c.EventsSince(r, b"\0", b"\0")).error == "COMPACTED"
        assert m.execute(c.OwnerEventsSince(r, "g")).error == "COMPACTED"
    # and a machine restored from its snapshot answers the same
    restored = CoordMachine(owner_history_limit=1_000)
    restored.restore(m.snapshot())
    for r in range(target, head + 1):
        assert _view(restored, r) == before[r]


def test_a_planted_wrong_compaction_is_caught():
    """The property's check fails on a compaction that drops one retained event too many
    (the checker can fail)."""
    m = _run([c.Put(b"a", b"1"), c.Put(b"a", b"2"), c.Put(b"b", b"3")])
    before = _view(m, 2)
    m.execute(c.Compact(2))
    history = m.kv.history
    history.events = [e for e in history.events if e.revision != 3]  # the planted loss
    history.revs = [e.revision for e in history.events]
    history.index = HistoryIndex(e.kv.key for e in history.events)
    assert _view(m, 2) != before
