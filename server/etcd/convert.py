"""etcd v3 protobuf <-> coord state-machine commands and results.

Requests become the same commands the native API proposes (a lease is a session, a
key's lease is its session id). What etcd's API layer refuses before proposing
(empty keys, ignore_value with a value, too many txn ops, duplicate keys in a txn) is
refused here with etcd's error, so nothing reaches the log. Range options the machine
does not know (sort, min/max revisions, keys/count only) are applied to its result
the way etcd's apply layer applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from coord.etcdpb import kv_pb2 as mvccpb
from coord.etcdpb import rpc_pb2 as pb
from coord.server.etcd import errors as err
from coord.server.requests.coordinator import Coordinator
from coord.sm import commands as c
from coord.sm import limits
from coord.sm.kv_checks import txn_write_conflict
from coord.sm.records import DELETE, KeyValue, WatchEvent
from coord.sm.results import DeleteRangeResult, PutResult, RangeResult, TxnResult

R = pb.RangeRequest
_OPS = {pb.Compare.EQUAL: "=", pb.Compare.GREATER: ">", pb.Compare.LESS: "<",
        pb.Compare.NOT_EQUAL: "!="}
# etcd's compare target -> (coord target, the target_union field holding the operand)
_TARGETS = {
    pb.Compare.VERSION: (c.VERSION, "version"),
    pb.Compare.CREATE: (c.CREATE, "create_revision"),
    pb.Compare.MOD: (c.MOD, "mod_revision"),
    pb.Compare.VALUE: (c.VALUE, "value"),
    pb.Compare.LEASE: (c.LEASE, "lease"),
}
_SORT_KEYS: dict[int, Callable[[KeyValue], object]] = {
    R.KEY: lambda kv: kv.key,
    R.VERSION: lambda kv: kv.version,
    R.CREATE: lambda kv: kv.create_revision,
    R.MOD: lambda kv: kv.mod_revision,
    R.VALUE: lambda kv: kv.value,
}


def kv_to_pb(kv: KeyValue) -> mvccpb.KeyValue:
    return mvccpb.KeyValue(key=kv.key, create_revision=kv.create_revision,
                           mod_revision=kv.mod_revision, version=kv.version, value=kv.value,
                           lease=kv.session_id)


def event_to_pb(e: WatchEvent, prev_kv: bool, compact_revision: int = 0) -> mvccpb.Event:
    """etcd's watch reads an event's prev_kv as the key stood at the revision before the
    event: none if the key was written earlier in the same txn, or if that revision is
    compacted."""
    out = mvccpb.Event(type=mvccpb.Event.DELETE if e.type == DELETE else mvccpb.Event.PUT,
                       kv=kv_to_pb(e.kv))
    if prev_kv and e.prev_kv is not None and e.prev_kv.mod_revision < e.revision \
            and e.revision - 1 >= compact_revision:
        out.prev_kv.CopyFrom(kv_to_pb(e.prev_kv))
    return out


# -- requests ----------------------------------------------------------------------------


def _fetch_all(r: pb.RangeRequest) -> bool:
    """etcd reads the whole range (then filters, sorts and cuts) when asked to sort or
    filter; otherwise it lets the store apply the limit."""
    return bool(r.sort_order != R.NONE or r.min_mod_revision or r.max_mod_revision
                or r.min_create_revision or r.max_create_revision)


def range_from_pb(r: pb.RangeRequest) -> c.Range:
    if not r.key:
        raise err.EMPTY_KEY
    limit = 0 if r.limit <= 0 or _fetch_all(r) else r.limit + 1  # one more: `more`
    return c.Range(r.key, r.range_end, limit, max(r.revision, 0))


def put_from_pb(r: pb.PutRequest, request_id: str = "") -> c.Put:
    """`request_id`: the command's, when it is proposed as it is (a txn's ops have none)."""
    if not r.key:
        raise err.EMPTY_KEY
    if r.ignore_value and r.value:
        raise err.VALUE_PROVIDED
    if r.ignore_lease and r.lease:
        raise err.LEASE_PROVIDED
    if r.lease < 0:
        raise err.LEASE_NOT_FOUND  # no session has a negative id
    return c.Put(r.key, r.value, r.lease, r.prev_kv, request_id, ignore_value=r.ignore_value,
                 ignore_lease=r.ignore_lease)


def delete_from_pb(r: pb.DeleteRangeRequest, request_id: str = "") -> c.DeleteRange:
    """`request_id`: as `put_from_pb`'s."""
    if not r.key:
        raise err.EMPTY_KEY
    return c.DeleteRange(r.key, r.range_end, r.prev_kv, request_id)


def compare_from_pb(x: pb.Compare) -> c.Compare:
    if not x.key:
        raise err.EMPTY_KEY
    target, field = _TARGETS.get(x.target, (None, ""))
    op = _OPS.get(x.result)
    if target is None or op is None:
        raise err.EtcdError(err.Code.INVALID_ARGUMENT, "etcdserver: unknown compare")
    operand = getattr(x, field)
    if target == c.VALUE:
        return c.Compare(x.key, target, op, value=operand, range_end=x.range_end)
    return c.Compare(x.key, target, op, number=operand, range_end=x.range_end)


def txn_from_pb(r: pb.TxnRequest, max_ops: int = limits.DEFAULT_MAX_TXN_OPS,
                request_id: str = "") -> c.Txn:
    """etcd's checkTxnRequest (`max_ops`: the member's --max-txn-ops) and checkIntervals
    (each branch whole), then the command (`request_id`: as `put_from_pb`'s)."""
    txn = _txn_from_pb(r, max_ops, request_id)
    for branch in (txn.success, txn.failure):
        if txn_write_conflict(branch) is not None:
            raise err.DUPLICATE_KEY
    return txn


def _txn_from_pb(r: pb.TxnRequest, budget: int, request_id: str = "") -> c.Txn:
    """A level's longest list counts against `budget`; what is left is its nested txns'."""
    ops = max(len(r.compare), len(r.success), len(r.failure))
    if ops > budget:
        raise err.TOO_MANY_OPS
    compares = tuple(compare_from_pb(x) for x in r.compare)
    success = tuple(_op_from_pb(o, budget - ops) for o in r.success)
    failure = tuple(_op_from_pb(o, budget - ops) for o in r.failure)
    return c.Txn(compares, success, failure, request_id)


def _op_from_pb(op: pb.RequestOp, budget: int) -> c.TxnOp:
    kind = op.WhichOneof("request")
    if kind == "request_range":
        return range_from_pb(op.request_range)
    if kind == "request_put":
        return put_from_pb(op.request_put)
    if kind == "request_delete_range":
        return delete_from_pb(op.request_delete_range)
    if kind == "request_txn":
        return _txn_from_pb(op.request_txn, budget)
    raise err.EtcdError(err.Code.INVALID_ARGUMENT, "etcdserver: empty request in txn")


# -- results -----------------------------------------------------------------------------


def range_to_pb(r: pb.RangeRequest, res: RangeResult, header: pb.ResponseHeader
                ) -> pb.RangeResponse:
    """etcd's apply-side range: filter by revisions, sort, cut to the limit."""
    kvs: Sequence[KeyValue] = res.kvs
    if r.max_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision <= r.max_mod_revision]
    if r.min_mod_revision:
        kvs = [kv for kv in kvs if kv.mod_revision >= r.min_mod_revision]
    if r.max_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision <= r.max_create_revision]
    if r.min_create_revision:
        kvs = [kv for kv in kvs if kv.create_revision >= r.min_create_revision]
    order = r.sort_order
    if r.sort_target != R.KEY and order == R.NONE:
        order = R.ASCEND
    if order != R.NONE and r.sort_target in _SORT_KEYS:
        kvs = sorted(kvs, key=_SORT_KEYS[r.sort_target], reverse=order == R.DESCEND)
    more = False
    if r.limit > 0 and len(kvs) > r.limit:
        kvs, more = kvs[: r.limit], True
    if r.count_only:  # etcd's store returns no kvs then, so none are cut: no `more`
        return pb.RangeResponse(header=header, count=res.count)
    out = pb.RangeResponse(header=header, more=more, count=res.count)
    for kv in kvs:
        m = out.kvs.add()
        m.CopyFrom(kv_to_pb(kv))
        if r.keys_only:
            m.value = b""
    return out


def put_to_pb(res: PutResult, header: pb.ResponseHeader) -> pb.PutResponse:
    out = pb.PutResponse(header=header)
    if res.prev_kv is not None:
        out.prev_kv.CopyFrom(kv_to_pb(res.prev_kv))
    return out


def delete_to_pb(res: DeleteRangeResult, header: pb.ResponseHeader) -> pb.DeleteRangeResponse:
    return pb.DeleteRangeResponse(header=header, deleted=res.deleted,
                                  prev_kvs=[kv_to_pb(kv) for kv in res.prev_kvs])


def txn_to_pb(r: pb.TxnRequest, res: TxnResult, header: pb.ResponseHeader) -> pb.TxnResponse:
    """Responses pair with the requests of the branch that ran (range options need
    the request). As etcd's, a nested response's header holds only the revision its op
    saw (a write's own; before the txn's first change, the starting one), and a nested
    txn's header is empty."""
    out = pb.TxnResponse(header=header, succeeded=res.succeeded)
    ops = r.success if res.succeeded else r.failure
    for op, sub in zip(ops, res.responses, strict=True):
        kind = op.WhichOneof("request")
        inner = pb.ResponseHeader(revision=sub.revision)
        if kind == "request_range":
            out.responses.add(response_range=range_to_pb(op.request_range, sub, inner))
        elif kind == "request_put":
            out.responses.add(response_put=put_to_pb(sub, inner))
        elif kind == "request_delete_range":
            out.responses.add(response_delete_range=delete_to_pb(sub, inner))
        else:
            out.responses.add(response_txn=txn_to_pb(op.request_txn, sub,
                                                     pb.ResponseHeader()))
    return out


def header(coord: Coordinator, revision: int | None = None) -> pb.ResponseHeader:
    """etcd's response header: this cluster and member, the revision the request saw
    (the current one if not given) and the Raft term."""
    node = coord.node
    return pb.ResponseHeader(
        cluster_id=node.cluster_id,
        member_id=node.me.id,
        revision=coord.machine.revision if revision is None else revision,
        raft_term=node.term,
    )
