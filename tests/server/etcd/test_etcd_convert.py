"""etcd's response shapes from coord's results (pure conversions), where the
differential test against real etcd found coord answering differently."""

from __future__ import annotations

from coord.etcdpb import rpc_pb2 as pb
from coord.server.etcd import convert as conv
from coord.sm.records import DELETE, PUT, KeyValue, WatchEvent
from coord.sm.results import DeleteRangeResult, PutResult, RangeResult, TxnResult

KV = KeyValue(b"k", b"v", 2, 2, 1)


def test_prev_kv_is_the_key_as_it_stood_the_revision_before():
    moved = WatchEvent(PUT, KeyValue(b"k", b"w", 2, 5, 2), KV, 5)
    assert conv.event_to_pb(moved, True).prev_kv.value == b"v"
    assert not conv.event_to_pb(moved, False).HasField("prev_kv")
    # written earlier in the same txn: etcd reads the revision before, where it was not
    same_txn = WatchEvent(DELETE, KeyValue(b"k", b"", 0, 5, 0), KeyValue(b"k", b"v", 5, 5, 1), 5)
    assert not conv.event_to_pb(same_txn, True).HasField("prev_kv")
    # the revision before is compacted: etcd cannot read it
    assert not conv.event_to_pb(moved, True, compact_revision=5).HasField("prev_kv")
    assert conv.event_to_pb(moved, True, compact_revision=4).HasField("prev_kv")


def test_count_only_never_says_more():
    res = RangeResult(revision=3, kvs=(KV, KV), count=2)
    out = conv.range_to_pb(pb.RangeRequest(key=b"k", limit=1, count_only=True), res,
                           pb.ResponseHeader(revision=3))
    assert (out.count, out.more, list(out.kvs)) == (2, False, [])
    out = conv.range_to_pb(pb.RangeRequest(key=b"k", limit=1), res, pb.ResponseHeader())
    assert (out.count, out.more, len(out.kvs)) == (2, True, 1)


def test_nested_responses_carry_their_own_revision_and_a_nested_txn_an_empty_header():
    put = pb.RequestOp(request_put=pb.PutRequest(key=b"a"))
    delete = pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"b"))
    inner = pb.TxnRequest(success=[put])
    req = pb.TxnRequest(success=[delete, put, pb.RequestOp(request_txn=inner)])
    res = TxnResult(revision=8, succeeded=True, responses=(
        DeleteRangeResult(revision=7), PutResult(revision=8),
        TxnResult(revision=8, succeeded=True, responses=(PutResult(revision=8),))))
    out = conv.txn_to_pb(req, res, pb.ResponseHeader(revision=8, member_id=1))
    assert out.header.revision == 8
    first, second, nested = out.responses
    assert first.response_delete_range.header.revision == 7  # before the txn's first change
    assert second.response_put.header.revision == 8
    assert nested.response_txn.HasField("header") and nested.response_txn.header.revision == 0
    assert nested.response_txn.responses[0].response_put.header.revision == 8


def test_the_command_proposed_carries_the_request_id_and_a_txns_ops_none():
    """A put, delete or txn is built with the id it is proposed under (a retry of it is
    then answered from the state machine's memory); the ops inside a txn are not
    commands and keep none, nested txns' included."""
    put = conv.put_from_pb(pb.PutRequest(key=b"k", value=b"v", lease=5, prev_kv=True), "p")
    assert (put.key, put.value, put.session_id, put.prev_kv, put.request_id) == (
        b"k", b"v", 5, True, "p")
    delete = conv.delete_from_pb(pb.DeleteRangeRequest(key=b"k", range_end=b"z",
                                                       prev_kv=True), "d")
    assert (delete.range_end, delete.prev_kv, delete.request_id) == (b"z", True, "d")
    inner = pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=b"b"))])
    txn = conv.txn_from_pb(pb.TxnRequest(success=[
        pb.RequestOp(request_put=pb.PutRequest(key=b"a")),
        pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"c")),
        pb.RequestOp(request_txn=inner)]), 128, "t")
    assert txn.request_id == "t"
    assert [op.request_id for op in txn.success] == ["", "", ""]
    assert txn.success[2].success[0].request_id == ""
