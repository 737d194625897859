"""State-machine support for the etcd v3 API: asked-for session (lease) ids, Put with
ignore_value/ignore_lease, LEASE compares, nested txns with etcd's write-conflict rule,
and a command encoding missing any field refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm import limits
from coord.sm import results as res
from coord.sm.errors import (
    COMPACTED,
    INVALID_ARGUMENT,
    KEY_NOT_FOUND,
    SESSION_EXISTS,
    TOO_LARGE,
    UNKNOWN_SESSION,
)
from coord.sm.kv_checks import txn_write_conflict
from coord.sm.machine import CoordMachine


@pytest.fixture
def m() -> CoordMachine:
    return CoordMachine()


def open_session(m: CoordMachine, session_id: int = 0, ttl_ms: int = 10_000) -> res.SessionResult:
    return m.execute(c.OpenSession("etcd-lease", ttl_ms, session_id=session_id), 1)


# -- sessions with asked-for ids ---------------------------------------------------------


def test_asked_for_session_id_is_honoured_and_counter_skips_it(m):
    assert open_session(m, 2).session_id == 2
    assert open_session(m).session_id == 1
    assert open_session(m).session_id == 3  # the counter skips the live 2
    assert open_session(m, 1 << 62).session_id == 1 << 62


def test_asked_for_id_of_a_live_session_is_refused_and_changes_nothing(m):
    open_session(m, 7)
    before = m.snapshot()
    r = open_session(m, 7)
    assert r.error == SESSION_EXISTS and r.session_id == 0
    assert m.snapshot() == before
    assert open_session(m, -1).error == INVALID_ARGUMENT
    assert m.snapshot() == before


def test_an_ended_sessions_id_may_be_asked_for_again(m):
    open_session(m, 9)
    m.execute(c.CloseSession(9))
    assert open_session(m, 9).session_id == 9


def test_snapshot_keeps_asked_for_ids_beyond_the_counter(m):
    open_session(m, 1000)
    m.execute(c.Put(b"k", b"v", 1000))
    other = CoordMachine()
    other.restore(m.snapshot())
    assert other.snapshot() == m.snapshot()
    assert other.sessions.get(1000).keys == {b"k"}
    assert open_session(other).session_id == 1


# -- ignore_value / ignore_lease ---------------------------------------------------------


def test_ignore_value_and_ignore_lease_keep_what_the_key_has(m):
    sid = open_session(m).session_id
    m.execute(c.Put(b"k", b"v1", sid))
    r = m.execute(c.Put(b"k", b"", ignore_value=True, ignore_lease=True, prev_kv=True))
    assert r.ok and r.prev_kv.value == b"v1"
    kv = m.kv.get(b"k")
    assert (kv.value, kv.session_id, kv.version) == (b"v1", sid, 2)
    m.execute(c.Put(b"k", b"v2", ignore_lease=True))
    assert (m.kv.get(b"k").value, m.kv.get(b"k").session_id) == (b"v2", sid)
    m.execute(c.Put(b"k", b"", 0, ignore_value=True))  # detaches from the session
    assert m.kv.get(b"k").session_id == 0 and b"k" not in m.sessions.get(sid).keys


def test_ignore_flags_refusals_change_nothing(m):
    sid = open_session(m).session_id
    m.execute(c.Put(b"k", b"v"))
    before = m.snapshot()
    assert m.execute(c.Put(b"missing", b"", ignore_value=True)).error == KEY_NOT_FOUND
    assert m.execute(c.Put(b"missing", b"x", ignore_lease=True)).error == KEY_NOT_FOUND
    assert m.execute(c.Put(b"k", b"x", ignore_value=True)).error == INVALID_ARGUMENT
    assert m.execute(c.Put(b"k", b"x", sid, ignore_lease=True)).error == INVALID_ARGUMENT
    assert m.snapshot() == before


# -- compares and nested txns ------------------------------------------------------------


def test_lease_compare(m):
    sid = open_session(m).session_id
    m.execute(c.Put(b"a", b"1", sid))
    m.execute(c.Put(b"b", b"1"))
    yes = m.execute(c.Txn((c.Compare(b"a", c.LEASE, "=", number=sid),
                           c.Compare(b"b", c.LEASE, "=", number=0),
                           c.Compare(b"missing", c.LEASE, "=", number=0))))
    assert yes.succeeded
    no = m.execute(c.Txn((c.Compare(b"a", c.LEASE, "!=", number=sid),)))
    assert no.ok and not no.succeeded


def test_nested_txn_judges_every_compare_before_anything_runs(m):
    m.execute(c.Put(b"x", b"0"))
    inner = c.Txn((c.Compare.of_value(b"x", "=", b"0"),),  # true before the outer put
                  (c.Put(b"inner", b"then"), c.Range(b"x")), (c.Put(b"inner", b"else"),))
    r = m.execute(c.Txn((c.Compare.of_version(b"x", "=", 1),),
                        (c.Put(b"x", b"1"), inner), (c.Range(b"x"),)))
    assert r.ok and r.succeeded
    assert type(r.responses[1]) is res.TxnResult and r.responses[1].succeeded
    assert r.responses[1].responses[1].kvs[0].value == b"1"  # reads see earlier writes
    assert m.kv.get(b"inner").value == b"then"
    assert m.kv.get(b"inner").mod_revision == m.kv.get(b"x").mod_revision == r.revision


def test_txn_state_checks_only_on_the_path_that_runs(m):
    # etcd checks a put's lease only if the put runs: a dead session in the other branch
    # does not refuse the txn.
    r = m.execute(c.Txn((c.Compare.of_create(b"k", "=", 0),), (c.Put(b"k", b"v"),),
                        (c.Put(b"k", b"v", 999),)))
    assert r.ok and r.succeeded
    before = m.snapshot()
    r = m.execute(c.Txn((c.Compare.of_create(b"k", "=", 0),), (c.Put(b"k", b"v"),),
                        (c.Put(b"k", b"v", 999),)))
    assert r.error == UNKNOWN_SESSION and m.snapshot() == before


def test_txn_op_budget_is_etcds(m):
    """etcd's budget rule, at apply's ceiling (a member's --max-txn-ops, at most that, is
    checked before proposing)."""
    top = limits.MAX_TXN_OPS
    many = tuple(c.Range(b"k") for _ in range(top))
    assert m.execute(c.Txn((), many)).ok
    assert m.execute(c.Txn((), many + (c.Range(b"k"),))).error == TOO_LARGE
    nested = c.Txn((), tuple(c.Range(b"k") for _ in range(top - 1)))
    assert m.execute(c.Txn((), (nested,))).ok  # 1 at the top leaves the rest below
    nested = c.Txn((), tuple(c.Range(b"k") for _ in range(top)))
    assert m.execute(c.Txn((), (nested,))).error == TOO_LARGE


@pytest.mark.parametrize(("ops", "conflict"), [
    ((c.Put(b"a", b""), c.Put(b"b", b"")), None),
    ((c.Put(b"a", b""), c.Put(b"a", b"")), b"a"),
    ((c.DeleteRange(b"a"), c.Put(b"a", b"")), b"a"),
    ((c.DeleteRange(b"a", b"c"), c.Put(b"b", b"")), b"b"),
    ((c.DeleteRange(b"a", b"c"), c.Put(b"c", b"")), None),
    ((c.DeleteRange(b"a", b"\0"), c.Put(b"b", b"")), None),  # etcd's string compare
    ((c.DeleteRange(b"a"), c.DeleteRange(b"a")), None),
    ((c.Txn((), (c.Put(b"a", b""),), (c.Put(b"a", b""),)),), None),  # then/else exclusive
    ((c.Txn((), (c.Put(b"a", b""),)), c.Put(b"a", b"")), b"a"),
    ((c.Txn((), (c.DeleteRange(b"a"),)), c.Put(b"a", b"")), b"a"),
    ((c.Txn((), (c.Put(b"a", b""),)), c.Txn((), (c.Put(b"a", b""),))), b"a"),
    ((c.Txn((), (c.Put(b"a", b""), c.Put(b"a", b""))),), b"a"),
])
def test_write_conflicts_follow_etcd(ops, conflict):
    assert txn_write_conflict(ops) == conflict


def test_conflicting_txn_is_refused_and_changes_nothing(m):
    before = m.snapshot()
    r = m.execute(c.Txn((), (c.Put(b"a", b"1"), c.Put(b"a", b"2"))))
    assert r.error == INVALID_ARGUMENT and "duplicate key" in r.message
    assert m.snapshot() == before


# -- encodings ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoded", [
    b'\x01\x01{"key":"aw==","prev_kv":false,"request_id":"","session_id":0,"value":"dg=="}',
    b'\x01\x0a{"name":"s","read_only_ok":false,"request_id":"","ttl_ms":5000}',
    b'\x01\x04{"compares":[{"key":"aw==","number":1,"op":"=","target":"VERSION",'
    b'"value":""}],"failure":[],"request_id":"","success":[]}',  # a compare without range_end
])
def test_an_encoding_missing_a_field_is_refused(encoded):
    """A put without ignore_value/ignore_lease, an open without session_id, a compare
    without range_end: every field is written, so one missing is not coord's encoding."""
    with pytest.raises(ValueError, match="fields .* != expected"):
        c.decode_command(encoded)


def test_nested_txn_round_trips():
    cmd = c.Txn((c.Compare(b"k", c.LEASE, "=", number=3),),
                (c.Txn((), (c.Put(b"a", b"1", ignore_lease=True),), (c.Range(b"a"),)),),
                (c.DeleteRange(b"a"),), "rid")
    data = c.encode_command(cmd)
    assert c.decode_command(data) == cmd and c.encode_command(c.decode_command(data)) == data
    result = res.TxnResult(succeeded=True, responses=(res.TxnResult(responses=(
        res.PutResult(revision=3),)),))
    assert c.decode_result(c.encode_result(result)) == result


op_keys = st.sampled_from([b"a", b"b", b"c"])
leaf_ops = st.one_of(
    st.builds(lambda k, v: c.Put(k, v), op_keys, st.sampled_from([b"", b"1"])),
    st.builds(lambda k: c.Range(k, b"\0"), op_keys),
    st.builds(lambda k, e: c.DeleteRange(k, e), op_keys, st.sampled_from([b"", b"c", b"\0"])),
)
txn_ops = st.recursive(leaf_ops, lambda inner: st.builds(
    lambda k, v, s, f: c.Txn((c.Compare.of_value(k, "=", v),), tuple(s), tuple(f)),
    op_keys, st.sampled_from([b"", b"1"]), st.lists(inner, max_size=3),
    st.lists(inner, max_size=3)), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(txn_ops, max_size=4), min_size=1, max_size=6))
def test_nested_txns_are_deterministic_and_replay_from_snapshots(batches):
    a, b = CoordMachine(), CoordMachine()
    for i, ops in enumerate(batches):
        cmd = c.Txn((c.Compare.of_version(b"a", ">", 0),), tuple(ops), tuple(reversed(ops)))
        before = a.snapshot()
        ra = a.apply(i + 1, 1, i, c.encode_command(cmd))
        assert b.apply(i + 1, 1, i, c.encode_command(cmd)).data == ra.data
        if ra.value.error:
            assert a.snapshot() == before  # a refused txn changes nothing
        if i == len(batches) // 2:
            b = CoordMachine()
            b.restore(a.snapshot())
    assert a.snapshot() == b.snapshot()


# -- compaction, as etcd's -------------------------------------------------------------


def test_compaction_keeps_the_revision_and_the_compact_revisions_events(m):
    """Found by the differential test: etcd's Compact does not move the revision, and a
    watch may start at the compact revision (its events are kept)."""
    for i in range(4):
        m.execute(c.Put(b"k", b"%d" % i))  # revisions 2..5 (an empty store is at 1)
    r = m.execute(c.Compact(4, request_id="cmp"))
    assert r.ok and r.revision == 5 == m.revision and r.compact_revision == 4
    assert m.execute(c.Compact(4, request_id="cmp")) == r  # a retry: answered from memory
    assert m.execute(c.Compact(4)).error == COMPACTED
    assert [e.revision for e in m.execute(c.EventsSince(4, b"k")).events] == [4, 5]
    late = m.execute(c.EventsSince(3, b"k"))
    assert late.error == COMPACTED and late.compact_revision == 4
    assert m.execute(c.Range(b"k", revision=4)).kvs[0].value == b"2"
    assert m.execute(c.Range(b"k", revision=3)).error == COMPACTED


def test_a_put_checks_its_lease_first_but_a_txns_put_its_key_first(m):
    """Found by the differential test: etcd's order of the two checks differs between a
    plain put and a put in a txn, and clients see which error comes first."""
    put = c.Put(b"missing", b"", 99, ignore_value=True)
    assert m.execute(put).error == UNKNOWN_SESSION
    assert m.execute(c.Txn((), (put,), ())).error == KEY_NOT_FOUND


def test_compact_zero_works_until_the_first_compaction_and_survives_snapshots(m):
    """Found by the differential test: etcd's compact revision starts below 0, so
    Compact(0) succeeds once on a store never compacted."""
    m.execute(c.Put(b"k", b"v"))
    assert m.execute(c.Compact(0)).ok
    assert m.execute(c.Compact(0)).error == COMPACTED
    fresh = CoordMachine()
    fresh.restore(m.snapshot())
    assert fresh.kv.history.compacted and fresh.execute(c.Compact(0)).error == COMPACTED


def test_a_txn_checks_every_put_on_its_path_before_any_range(m):
    """Found by the differential test: etcd checks the puts of the path that will run
    (nested ones too) before its ranges, whatever their order."""
    future = c.Range(b"k", revision=1000)
    nested = c.Txn((), (c.Put(b"k", b"v", 99),), ())
    assert m.execute(c.Txn((), (future, nested), ())).error == UNKNOWN_SESSION
    assert m.execute(c.Txn((), (future,), ())).error == "FUTURE_REVISION"


def test_compaction_keeps_only_the_puts_that_stand_at_the_compact_revision(m):
    """Found by the differential test: etcd's compaction drops the compact revision's
    deletes (and a put deleted in the same txn), so a watch from there does not see them."""
    m.execute(c.Put(b"k", b"1"))  # 2
    m.execute(c.DeleteRange(b"k"))  # 3
    m.execute(c.Txn((), (c.Put(b"p", b"x"), c.Put(b"q", b"y"),
                         c.DeleteRange(b"q", b"\0")), ()))  # 4: q put, then deleted
    assert m.execute(c.Compact(3)).ok
    assert m.execute(c.EventsSince(3, b"\0", b"\0")).events[0].revision == 4
    assert m.execute(c.Compact(4)).ok
    kept = m.execute(c.EventsSince(4, b"\0", b"\0")).events
    assert [(e.type, e.kv.key) for e in kept] == [("PUT", b"p")]
    assert [kv.key for kv in m.execute(c.Range(b"\0", b"\0", revision=4)).kvs] == [b"p"]
