"""The MVCC-lite KV store: every operation, txn compares, history, compaction, limits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import canonical_json, limits
from coord.sm import commands as c
from coord.sm.errors import (
    COMPACTED,
    FUTURE_REVISION,
    INVALID_ARGUMENT,
    TOO_LARGE,
    UNKNOWN_SESSION,
)
from coord.sm.kv import KVStore
from coord.sm.records import DELETE, PUT, KeyValue
from coord.sm.sessions import SessionTable


@pytest.fixture
def kv() -> KVStore:
    return KVStore()


def keys(result) -> list[bytes]:
    return [kv.key for kv in result.kvs]


def test_put_tracks_revisions_and_versions(kv):
    assert kv.ledger.revision == 1  # an empty store is at revision 1, as etcd's
    r1 = kv.put(b"a", b"1")
    assert r1.ok and r1.revision == 2 and kv.ledger.revision == 2
    r2 = kv.put(b"a", b"2", prev_kv=True)
    assert r2.revision == 3 and r2.prev_kv == KeyValue(b"a", b"1", 2, 2, 1)
    assert kv.get(b"a") == KeyValue(b"a", b"2", 2, 3, 2)
    assert kv.put(b"a", b"3").prev_kv is None  # only when asked
    kv.delete_range(b"a")
    kv.put(b"a", b"again")
    assert kv.get(b"a") == KeyValue(b"a", b"again", 6, 6, 1)  # version restarts at 1


def test_range_end_semantics(kv):
    for k in (b"a", b"ab", b"b", b"ba", b"c"):
        kv.put(k, k)
    assert keys(kv.range(b"ab")) == [b"ab"]
    assert keys(kv.range(b"zz")) == []
    assert keys(kv.range(b"ab", b"b")) == [b"ab"]
    assert keys(kv.range(b"a", b"c")) == [b"a", b"ab", b"b", b"ba"]
    assert keys(kv.range(b"b", b"\0")) == [b"b", b"ba", b"c"]
    assert keys(kv.range(b"\0", b"\0")) == [b"a", b"ab", b"b", b"ba", b"c"]
    assert keys(kv.range(b"c", b"a")) == []
    r = kv.range(b"a", b"\0", limit=2)
    assert keys(r) == [b"a", b"ab"] and r.count == 5 and r.more
    r = kv.range(b"a", b"\0", limit=5)
    assert r.count == 5 and not r.more
    assert kv.range(b"a").revision == kv.ledger.revision == 6


def test_range_at_past_revisions(kv):
    kv.put(b"a", b"1")  # 2
    kv.put(b"b", b"1")  # 3
    kv.put(b"a", b"2")  # 4
    kv.delete_range(b"b")  # 5
    kv.put(b"c", b"1")  # 6
    at = {rev: {x.key: x.value for x in kv.range(b"\0", b"\0", revision=rev).kvs}
          for rev in range(1, 7)}
    assert at[1] == {}  # the empty store's revision
    assert at[2] == {b"a": b"1"}
    assert at[3] == {b"a": b"1", b"b": b"1"}
    assert at[4] == {b"a": b"2", b"b": b"1"}
    assert at[5] == {b"a": b"2"}
    assert at[6] == {b"a": b"2", b"c": b"1"}
    assert kv.range(b"a", revision=3).kvs[0] == KeyValue(b"a", b"1", 2, 2, 1)
    assert kv.range(b"a", revision=7).error == FUTURE_REVISION


def test_delete_range(kv):
    for k in (b"a", b"b", b"c", b"d"):
        kv.put(k, b"v")
    rev = kv.ledger.revision
    r = kv.delete_range(b"b", b"d", prev_kv=True)
    assert r.deleted == 2 and r.revision == rev + 1
    assert [x.key for x in r.prev_kvs] == [b"b", b"c"]
    assert keys(kv.range(b"\0", b"\0")) == [b"a", b"d"]
    nothing = kv.delete_range(b"zz")
    assert nothing.ok and nothing.deleted == 0 and kv.ledger.revision == rev + 1  # no change
    assert kv.delete_range(b"a", b"\0").deleted == 2 and len(kv) == 0


def test_txn_compares_on_every_target_and_op(kv):
    kv.put(b"k", b"m")  # create 2, mod 2, version 1
    kv.put(b"k", b"m")  # mod 3, version 2
    cases = [
        (c.Compare.of_value(b"k", "=", b"m"), True),
        (c.Compare.of_value(b"k", "!=", b"m"), False),
        (c.Compare.of_value(b"k", "<", b"n"), True),
        (c.Compare.of_value(b"k", ">", b"n"), False),
        (c.Compare.of_version(b"k", "=", 2), True),
        (c.Compare.of_version(b"k", ">", 1), True),
        (c.Compare.of_version(b"k", "<", 2), False),
        (c.Compare.of_create(b"k", "=", 2), True),
        (c.Compare.of_create(b"k", "!=", 2), False),
        (c.Compare.of_mod(b"k", "=", 3), True),
        (c.Compare.of_mod(b"k", "<", 3), False),
        # a missing key: version, create and mod are 0; a value compare is false
        (c.Compare.of_version(b"missing", "=", 0), True),
        (c.Compare.of_create(b"missing", "=", 0), True),
        (c.Compare.of_mod(b"missing", "<", 1), True),
        (c.Compare.of_value(b"missing", "=", b""), False),
        (c.Compare.of_value(b"missing", "!=", b"x"), False),
    ]
    for cmp, expected in cases:
        r = kv.txn([cmp], [], [])
        assert r.ok and r.succeeded is expected, cmp
    assert kv.ledger.revision == 3  # read-only txns change nothing


def test_txn_runs_a_branch_atomically_at_one_revision(kv):
    kv.put(b"a", b"1")
    kv.put(b"gone", b"x")
    r = kv.txn([c.Compare.of_value(b"a", "=", b"1")],
               [c.Put(b"a", b"2"), c.Put(b"b", b"1"), c.DeleteRange(b"gone"), c.Range(b"a")],
               [c.Put(b"never", b"x")])
    assert r.ok and r.succeeded and r.revision == 4
    put_a, put_b, deleted, read = r.responses
    assert put_a.revision == put_b.revision == deleted.revision == 4
    assert deleted.deleted == 1
    assert read.kvs[0].value == b"2"  # ranges see earlier writes of the same txn
    assert kv.get(b"never") is None
    r2 = kv.txn([c.Compare.of_value(b"a", "=", b"1")], [c.Put(b"x", b"1")], [c.Range(b"a")])
    assert not r2.succeeded and r2.responses[0].kvs[0].value == b"2"
    assert kv.ledger.revision == 4


def test_txn_validates_both_branches_before_running(kv):
    kv.put(b"a", b"1")
    bad_failure = kv.txn([], [c.Put(b"ok", b"1")], [c.Put(b"", b"x")])
    assert bad_failure.error == INVALID_ARGUMENT and kv.get(b"ok") is None
    twice = kv.txn([], [c.Put(b"k", b"1"), c.Put(b"k", b"2")], [])
    assert twice.error == INVALID_ARGUMENT
    overlap = kv.txn([], [c.Put(b"k1", b"1"), c.DeleteRange(b"k", b"l")], [])
    assert overlap.error == INVALID_ARGUMENT
    over = limits.MAX_TXN_OPS + 1
    too_many = kv.txn([], [c.Put(b"k%d" % i, b"") for i in range(over)], [])
    assert too_many.error == TOO_LARGE
    assert kv.txn([c.Compare(b"a", "SIZE", "=")], [], []).error == INVALID_ARGUMENT
    assert kv.txn([c.Compare(b"a", "VALUE", "<=")], [], []).error == INVALID_ARGUMENT
    assert kv.txn([], [c.Range(b"a", revision=99)], []).error == FUTURE_REVISION
    assert kv.ledger.revision == 2 and len(kv) == 1


def test_put_if_absent_and_compare_and_set(kv):
    first = kv.put_if_absent(b"reg", b"A")
    assert first.succeeded
    second = kv.put_if_absent(b"reg", b"B")
    assert not second.succeeded and second.responses[0].kvs[0].value == b"A"
    assert not kv.compare_and_set(b"reg", 0, b"C").succeeded
    assert kv.compare_and_set(b"reg", 1, b"C").succeeded
    # the specification's "someone else wrote version 2":
    stale = kv.compare_and_set(b"reg", 1, b"D")
    assert not stale.succeeded and stale.responses[0].kvs[0].value == b"C"
    assert kv.get(b"reg").version == 2
    assert kv.compare_and_set(b"new", 0, b"x").succeeded
    # the same helpers as commands
    txn = c.Txn.compare_and_set(b"reg", 2, b"E", request_id="r1")
    assert kv.txn(txn.compares, txn.success, txn.failure).succeeded


def test_compaction_and_its_errors(kv):
    for i in range(5):
        kv.put(b"k", b"%d" % i)  # revisions 2..6
    assert kv.compact(7).error == FUTURE_REVISION
    assert kv.compact(-1).error == INVALID_ARGUMENT
    r = kv.compact(4)
    # as etcd's: the revision stays where it is
    assert r.ok and r.compact_revision == 4 and r.revision == 6 and kv.ledger.revision == 6
    assert kv.compact(4).error == COMPACTED and kv.compact(3).error == COMPACTED
    assert kv.range(b"k", revision=3).error == COMPACTED
    assert kv.range(b"k", revision=4).kvs[0].value == b"2"  # the compact revision itself
    assert kv.range(b"k", revision=5).kvs[0].value == b"3"
    assert kv.compact(7).error == FUTURE_REVISION and kv.compact(6).ok


def test_events_since_and_compaction(kv):
    kv.put(b"a", b"1")  # 2
    kv.put(b"b", b"1")  # 3
    kv.put(b"a", b"2")  # 4
    kv.delete_range(b"a")  # 5
    r = kv.events_since(3, b"a")
    assert [(e.type, e.revision) for e in r.events] == [(PUT, 4), (DELETE, 5)]
    assert r.events[0].prev_kv.value == b"1"
    assert r.events[1].kv == KeyValue(b"a", b"", 0, 5, 0) and r.events[1].prev_kv.value == b"2"
    assert [e.revision for e in kv.events_since(1, b"\0", b"\0").events] == [2, 3, 4, 5]
    assert kv.events_since(6, b"a").events == ()
    kv.compact(4)
    late = kv.events_since(3, b"a")
    assert late.error == COMPACTED and late.compact_revision == 4
    # etcd's rule: a watch may start at the compact revision itself
    assert [e.revision for e in kv.events_since(4, b"\0", b"\0").events] == [4, 5]
    assert kv.events_since(0, b"a").error == INVALID_ARGUMENT


def test_every_change_emits_a_watch_event_at_its_revision(kv):
    kv.put(b"a", b"1")
    kv.txn([], [c.Put(b"b", b"1"), c.DeleteRange(b"a")], [])
    events = kv.ledger.drain()
    assert [(e.type, e.kv.key, e.revision) for e in events] == [
        (PUT, b"a", 2), (PUT, b"b", 3), (DELETE, b"a", 3)]


def test_session_bound_keys():
    sessions = SessionTable()
    kv = KVStore(sessions)
    sid = sessions.open("s", 5_000, False, 0).session_id
    assert kv.put(b"eph", b"1", session_id=sid).ok
    kv.put(b"moved", b"1", session_id=sid)
    kv.put(b"moved", b"2")  # rebinding to no session detaches it
    assert sessions.get(sid).keys == {b"eph"}
    assert kv.put(b"x", b"1", session_id=99).error == UNKNOWN_SESSION
    sessions.close(sid)
    assert kv.get(b"eph") is None and kv.get(b"moved") is not None


def kvs_state(kv: KVStore) -> str:
    return "".join(canonical_json.iter_dumps(kv.capture()["kv_columns"]))


def test_bad_input_is_refused_and_changes_nothing(kv):
    kv.put(b"a", b"1")
    before = (kvs_state(kv), kv.ledger.revision)
    kv.ledger.drain()
    refused = [
        kv.put(b"", b"x"),
        kv.put(b"k" * 1537, b"x"),
        kv.put(b"k", b"v" * ((1 << 20) + 1)),
        kv.put("str", b"x"),  # type: ignore[arg-type]
        kv.put(b"k", b"x", session_id=-1),
        kv.range(b""),
        kv.range(b"a", limit=-1),
        kv.delete_range(b""),
        kv.compact(5),
    ]
    assert [r.error for r in refused] == [
        INVALID_ARGUMENT, TOO_LARGE, TOO_LARGE, INVALID_ARGUMENT, INVALID_ARGUMENT,
        INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, FUTURE_REVISION]
    assert all(r.message for r in refused)
    assert kv.put(b"k" * 1536, b"v" * (1 << 20)).ok  # exactly at the limits is fine
    kv.delete_range(b"k" * 1536)
    assert kvs_state(kv) == before[0] and kv.ledger.drain()[0].type == PUT


ops = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.booleans()), max_size=25)


@settings(max_examples=100, deadline=None)
@given(ops)
def test_reads_at_every_past_revision_match_a_model(history):
    kv = KVStore()
    model: dict[int, dict[bytes, bytes]] = {0: {}}
    state: dict[bytes, bytes] = {}
    for i, (key, delete) in enumerate(history):
        if delete:
            changed = kv.delete_range(key).deleted > 0
            state.pop(key, None)
        else:
            kv.put(key, b"%d" % i)
            state[key] = b"%d" % i
            changed = True
        if changed:
            model[kv.ledger.revision] = dict(state)
    for rev, expected in model.items():
        if rev == 0:
            continue
        got = kv.range(b"\0", b"\0", revision=rev)
        assert {x.key: x.value for x in got.kvs} == expected
