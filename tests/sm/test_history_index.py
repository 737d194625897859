"""The per-key history index answers as a scan does: after any history of puts, deletes,
multi-event txns and session releases, with compactions and snapshot restores between
them, every read at a retained revision and every watch start, over one key, a narrow
range, a prefix or every key, equals a plain scan of the history — whichever path
(`SCAN_FACTOR`) the store takes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm.kv import KVStore
from coord.sm.kv_history import ALL_KEYS, SCAN_FACTOR, in_range
from coord.sm.kv_index import HistoryIndex
from coord.sm.machine import CoordMachine
from coord.sm.records import KeyValue, WatchEvent

KEYS = [b"a", b"ab", b"abc", b"b", b"ba", b"c"]
keys = st.sampled_from(KEYS)
values = st.binary(max_size=2)

ops = st.one_of(
    st.builds(lambda k, v: ("put", c.Put(k, v)), keys, values),
    st.builds(lambda k: ("put", c.DeleteRange(k)), keys),
    st.builds(lambda k: ("put", c.DeleteRange(k, ALL_KEYS)), keys),
    st.builds(lambda k, v: ("put", c.Txn((), (c.Put(k, v), c.Put(k + b"z", v),
                                              c.DeleteRange(b"c")))), keys, values),
    st.builds(lambda k, v: ("leased", k, v), keys, values),
    st.just(("close",)),
    st.builds(lambda f: ("compact", f), st.floats(0, 1)),
    st.just(("restore",)),
)
ranges = st.one_of(
    st.builds(lambda k: (k, b""), keys),  # one key
    st.builds(lambda k, e: (k, e), keys, keys),  # a narrow range (maybe empty)
    st.builds(lambda k: (k, k[:-1] + bytes([k[-1] + 1])), keys),  # a prefix
    st.builds(lambda k: (k, ALL_KEYS), keys),  # every key from k
)


def _run(steps: list) -> CoordMachine:
    m = CoordMachine()
    session = 0
    for step in steps:
        if step[0] == "put":
            m.execute(step[1])
        elif step[0] == "leased":  # bound to a session whose end deletes them in one go
            if not session:
                session = m.execute(c.OpenSession("s", 10_000)).session_id
            m.execute(c.Put(step[1], step[2], session))
        elif step[0] == "close":
            if session:
                m.execute(c.CloseSession(session))
                session = 0
        elif step[0] == "compact":
            low = max(1, m.kv.compact_revision)
            m.execute(c.Compact(low + round(step[1] * (m.revision - low))))
        else:
            m = m.restored(m.snapshot())
    return m


def _scan_state(kv: KVStore, revision: int, key: bytes, range_end: bytes) -> list[KeyValue]:
    """The reference: current values, with every later event undone, newest first."""
    match = in_range(key, range_end)
    state: dict[bytes, KeyValue | None] = {k: v for k, v in kv._kvs.items() if match(k)}
    for e in reversed(kv.history.events):
        if e.revision > revision and match(e.kv.key):
            state[e.kv.key] = e.prev_kv
    return [v for _, v in sorted(state.items()) if v is not None]


def _scan_events(kv: KVStore, revision: int, key: bytes, range_end: bytes
                 ) -> tuple[WatchEvent, ...]:
    match = in_range(key, range_end)
    return tuple(e for e in kv.history.events if e.revision >= revision and match(e.kv.key))


def _check_index(kv: KVStore) -> None:
    """The index holds exactly each key's positions in the history."""
    expected: dict[bytes, list[int]] = {}
    for i, e in enumerate(kv.history.events):
        expected.setdefault(e.kv.key, []).append(i)
    index = kv.history.index
    assert len(index) == len(kv.history.events)
    assert index.keys_at(*index.span(b"\0", None)) == sorted(expected)
    for key, positions in expected.items():
        assert index.since(key, 0) == positions
        assert index.first(key, positions[-1]) == positions[-1]
        assert index.first(key, positions[-1] + 1) is None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=40), st.lists(ranges, min_size=1, max_size=4),
       st.sampled_from([0, SCAN_FACTOR, 10**9]), st.data())
def test_indexed_reads_and_watches_equal_a_scan(steps, reads, factor, data):
    m = _run(steps)
    kv = m.kv
    _check_index(kv)
    low = max(1, kv.compact_revision)
    kv.history.scan_factor = factor  # 0: the index, 10**9: a scan
    for key, range_end in reads:
        revision = data.draw(st.integers(low, m.revision), label="revision")
        got = m.execute(c.Range(key, range_end, revision=revision))
        assert got.error == ""
        assert list(got.kvs) == _scan_state(kv, revision, key, range_end)
        watch = m.execute(c.EventsSince(revision, key, range_end))
        assert watch.error == ""
        assert watch.events == _scan_events(kv, revision, key, range_end)


def test_a_stale_index_is_caught():
    """The reference check fails when the index misses one event (the checks can fail)."""
    m = _run([("put", c.Put(b"a", b"1")), ("put", c.Put(b"a", b"2")),
              ("put", c.Put(b"b", b"3"))])
    kv = m.kv
    kv.history.index = HistoryIndex(e.kv.key for e in kv.history.events[:-1])  # the planted loss
    kv.history.scan_factor = 0  # so the watch goes by the index
    with pytest.raises(AssertionError):
        _check_index(kv)
    assert m.execute(c.EventsSince(1, b"b")).events != _scan_events(kv, 1, b"b", b"")
