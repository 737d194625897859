"""Protobuf <-> state-machine conversions for the client API (coord.v1.coord)."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm.records import KeyValue, Owner, OwnershipEvent, WatchEvent
from coord.sm.results import DeleteRangeResult, PutResult, RangeResult, TxnResult
from coord.v1 import coord_pb2 as pb


def prefix_end(key: bytes) -> bytes:
    """The range end that makes [key, end) cover every key starting with `key`."""
    stripped = key.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def key_range(key: bytes, range_end: bytes, prefix: bool) -> tuple[bytes, bytes]:
    return key, prefix_end(key) if prefix else range_end


def kv_to_pb(kv: KeyValue | None) -> pb.KeyValue | None:
    if kv is None:
        return None
    return pb.KeyValue(
        key=kv.key,
        value=kv.value,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
        version=kv.version,
        session_id=kv.session_id,
    )


def owner_to_pb(o: Owner) -> pb.Owner:
    return pb.Owner(
        resource=o.resource, session_id=o.session_id, generation=o.generation, revision=o.revision
    )


def ownership_event_to_pb(event: OwnershipEvent) -> pb.OwnerChange:
    owner = Owner(event.resource, event.owner, event.generation, event.revision)
    return pb.OwnerChange(group=event.group, owner=owner_to_pb(owner), kind=event.kind)


def watch_event_to_pb(e: WatchEvent, prev_kv: bool) -> pb.WatchEvent:
    out = pb.WatchEvent(type=e.type, kv=kv_to_pb(e.kv))
    if prev_kv and e.prev_kv is not None:
        out.prev_kv.CopyFrom(kv_to_pb(e.prev_kv))
    return out


def range_from_pb(r: pb.RangeRequest) -> c.Range:
    key, end = key_range(r.key, r.range_end, r.prefix)
    return c.Range(key, end, r.limit, r.revision)


def put_from_pb(r: pb.PutRequest) -> c.Put:
    return c.Put(r.key, r.value, r.session_id, r.prev_kv, r.request_id)


def delete_from_pb(r: pb.DeleteRangeRequest) -> c.DeleteRange:
    key, end = key_range(r.key, r.range_end, r.prefix)
    return c.DeleteRange(key, end, r.prev_kv, r.request_id)


def _op_from_pb(op: pb.RequestOp) -> c.TxnOp:
    kind = op.WhichOneof("request")
    if kind == "range":
        return range_from_pb(op.range)
    if kind == "put":
        return put_from_pb(op.put)
    if kind == "delete_range":
        return delete_from_pb(op.delete_range)
    raise ValueError("empty operation in txn")


def txn_from_pb(r: pb.TxnRequest) -> c.Txn:
    # The API spells targets in lower case (value|version|create|mod); the machine's
    # constants are upper case.
    compares = tuple(
        c.Compare(x.key, x.target.upper(), x.op, x.value, x.number) for x in r.compares
    )
    return c.Txn(
        compares,
        tuple(_op_from_pb(o) for o in r.success),
        tuple(_op_from_pb(o) for o in r.failure),
        r.request_id,
    )


def range_result_to_pb(res: RangeResult, header: pb.ResponseHeader) -> pb.RangeResponse:
    return pb.RangeResponse(
        header=header, kvs=[kv_to_pb(kv) for kv in res.kvs], count=res.count, more=res.more
    )


def put_result_to_pb(res: PutResult, header: pb.ResponseHeader) -> pb.PutResponse:
    out = pb.PutResponse(header=header)
    if res.prev_kv is not None:
        out.prev_kv.CopyFrom(kv_to_pb(res.prev_kv))
    return out


def delete_result_to_pb(
    res: DeleteRangeResult, header: pb.ResponseHeader
) -> pb.DeleteRangeResponse:
    return pb.DeleteRangeResponse(
        header=header, deleted=res.deleted, prev_kvs=[kv_to_pb(kv) for kv in res.prev_kvs]
    )


def txn_result_to_pb(res: TxnResult, header: pb.ResponseHeader) -> pb.TxnResponse:
    out = pb.TxnResponse(header=header, succeeded=res.succeeded)
    for r in res.responses:
        if isinstance(r, RangeResult):
            out.responses.add(range=range_result_to_pb(r, header))
        elif isinstance(r, PutResult):
            out.responses.add(put=put_result_to_pb(r, header))
        else:
            out.responses.add(delete_range=delete_result_to_pb(r, header))
    return out
