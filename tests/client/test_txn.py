"""`TxnBuilder` (coord.client.txn): the request it builds, a fresh request_id per build,
and the compares it refuses."""

from __future__ import annotations

import pytest

from coord.client.calls import txn_call
from coord.client.txn import TxnBuilder
from coord.v1 import coord_pb2 as pb


def test_txn_builder_builds_request():
    req = (
        TxnBuilder()
        .if_version("k", "=", 0)
        .if_value(b"v", "!=", "x")
        .if_mod("m", ">", 5)
        .if_create("cr", "<", 9)
        .then_put("k", "v1", session=7, prev_kv=True)
        .then_get(prefix="jobs/", limit=3)
        .else_get("k")
        .else_delete("a", "b", prev_kv=True)
        .build(request_id="rid")
    )
    expected = pb.TxnRequest(
        compares=[
            pb.Compare(key=b"k", target="version", op="=", number=0),
            pb.Compare(key=b"v", target="value", op="!=", value=b"x"),
            pb.Compare(key=b"m", target="mod", op=">", number=5),
            pb.Compare(key=b"cr", target="create", op="<", number=9),
        ],
        success=[
            pb.RequestOp(put=pb.PutRequest(key=b"k", value=b"v1", session_id=7, prev_kv=True)),
            pb.RequestOp(range=pb.RangeRequest(key=b"jobs/", range_end=b"jobs0", limit=3)),
        ],
        failure=[
            pb.RequestOp(range=pb.RangeRequest(key=b"k")),
            pb.RequestOp(delete_range=pb.DeleteRangeRequest(key=b"a", range_end=b"b",
                                                            prev_kv=True)),
        ],
        request_id="rid",
    )
    assert req == expected


def test_txn_builder_fresh_request_id_and_validation():
    t = TxnBuilder().if_version("k", "==", 0).then_put("k", "v")
    a, b = t.build(), t.build()
    assert a.request_id and b.request_id and a.request_id != b.request_id
    assert a.compares[0].op == "="
    with pytest.raises(ValueError):
        TxnBuilder().if_version("k", "<=", 1)
    with pytest.raises(TypeError):
        TxnBuilder().if_version("k", "=", "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TxnBuilder().compare("k", "lease", "=", 1)
    with pytest.raises(ValueError):
        txn_call(pb.TxnRequest())
