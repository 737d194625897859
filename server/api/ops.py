"""The native API's request/response operations, each written once: a request message
in, a response message out, refusals raised as `ApiError`. The unary services (`kv`,
`ownership`, `producers`) serve one per call; the pipelined stream (`pipeline`) serves
many per message. `OPS` names each by its field in PipelineOp/PipelineResult."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from coord.server.api import convert
from coord.server.api.common import Caller, commit, invalid_argument, query, serve
from coord.server.api.convert import owner_to_pb
from coord.server.requests.coordinator import Coordinator
from coord.sm import commands as c
from coord.sm.records import Claim, Owner
from coord.v1 import coord_pb2 as pb

DEFAULT_BLOCK = 1000

Op = Callable[[Coordinator, Caller, Any], Awaitable[Any]]


# -- KV -----------------------------------------------------------------------------------
async def put(coord: Coordinator, caller: Caller, req: pb.PutRequest) -> pb.PutResponse:
    res = await commit(coord, caller, convert.put_from_pb(req))
    return convert.put_result_to_pb(res, coord.header(res.revision))


async def range_(coord: Coordinator, caller: Caller, req: pb.RangeRequest) -> pb.RangeResponse:
    res = await query(coord, caller, convert.range_from_pb(req), req.serializable)
    return convert.range_result_to_pb(res, coord.header())


async def delete_range(
    coord: Coordinator, caller: Caller, req: pb.DeleteRangeRequest
) -> pb.DeleteRangeResponse:
    res = await commit(coord, caller, convert.delete_from_pb(req))
    return convert.delete_result_to_pb(res, coord.header(res.revision))


async def txn(coord: Coordinator, caller: Caller, req: pb.TxnRequest) -> pb.TxnResponse:
    coord.limits.check_txn_ops(max(len(req.compares), len(req.success), len(req.failure)))
    try:
        cmd = convert.txn_from_pb(req)
    except ValueError as e:
        raise invalid_argument(str(e)) from None
    res = await commit(coord, caller, cmd)
    return convert.txn_result_to_pb(res, coord.header(res.revision))


async def _cas(coord: Coordinator, caller: Caller, key: bytes, version: int, value: bytes,
               session: int, rid: str) -> pb.CasResponse:
    """The register of "Linearizable Distributed Map On Kafka": write iff the key is at
    `version` (0: absent). Both branches read the key back, so the caller sees it now."""
    cmd = c.Txn(
        (c.Compare.of_version(key, "=", version),),
        (c.Put(key, value, session), c.Range(key)),
        (c.Range(key),),
        rid,
    )
    res = await commit(coord, caller, cmd)
    current = res.responses[-1].kvs
    out = pb.CasResponse(header=coord.header(res.revision), succeeded=res.succeeded)
    if current:
        out.kv.CopyFrom(convert.kv_to_pb(current[0]))
    return out


async def put_if_absent(
    coord: Coordinator, caller: Caller, req: pb.PutIfAbsentRequest
) -> pb.CasResponse:
    return await _cas(coord, caller, req.key, 0, req.value, req.session_id, req.request_id)


async def compare_and_set(
    coord: Coordinator, caller: Caller, req: pb.CompareAndSetRequest
) -> pb.CasResponse:
    if req.expected_version < 0:
        raise invalid_argument("expected_version must be >= 0")
    return await _cas(coord, caller, req.key, req.expected_version, req.value, req.session_id,
                      req.request_id)


# -- ownership ----------------------------------------------------------------------------
async def own(coord: Coordinator, caller: Caller, req: pb.OwnRequest) -> pb.OwnResponse:
    claims = tuple(Claim(x.resource, x.generation) for x in req.claims)
    columnar = req.HasField("claim_columns")
    if columnar:
        cols = req.claim_columns
        if len(cols.resources) != len(cols.generations):
            raise invalid_argument(
                f"claim_columns has {len(cols.resources)} resources and "
                f"{len(cols.generations)} generations; they are pairs")
        claims += tuple(map(Claim, cols.resources, cols.generations))
    res = await commit(coord, caller, c.Own(req.session_id, req.group, claims, req.request_id))
    out = pb.OwnResponse(header=coord.header(res.revision), severed=res.severed)
    if columnar:
        out.grant_columns.SetInParent()  # present even with no grants: the client asked
        if res.grants:
            resources, generations, revisions = zip(*res.grants, strict=True)
            out.grant_columns.resources.extend(resources)
            out.grant_columns.generations.extend(generations)
            out.grant_columns.revisions.extend(revisions)
    else:
        out.grants.extend(pb.Grant(resource=g.resource, generation=g.generation,
                                   revision=g.revision) for g in res.grants)
    return out


async def release(coord: Coordinator, caller: Caller, req: pb.ReleaseRequest) -> pb.ReleaseResponse:
    cmd = c.Release(req.session_id, req.group, tuple(req.resources), req.request_id)
    res = await commit(coord, caller, cmd)
    return pb.ReleaseResponse(header=coord.header(res.revision), released=list(res.released))


async def get_owner(
    coord: Coordinator, caller: Caller, req: pb.GetOwnerRequest
) -> pb.GetOwnerResponse:
    res = await query(coord, caller, c.GetOwner(req.group, req.resource), req.serializable)
    owner = Owner(res.resource, res.owner, res.generation, res.owner_revision)
    return pb.GetOwnerResponse(header=coord.header(), owner=owner_to_pb(owner))


async def list_owners(
    coord: Coordinator, caller: Caller, req: pb.ListOwnersRequest
) -> pb.ListOwnersResponse:
    res = await query(coord, caller, c.ListOwners(req.group, req.prefix), req.serializable)
    return pb.ListOwnersResponse(header=coord.header(), owners=[owner_to_pb(o) for o in res.owners])


# -- producer ids -------------------------------------------------------------------------
async def allocate_pid_block(
    coord: Coordinator, caller: Caller, req: pb.AllocatePidBlockRequest
) -> pb.AllocatePidBlockResponse:
    cmd = c.AllocatePidBlock(req.requester, req.size or DEFAULT_BLOCK, req.request_id)
    res = await commit(coord, caller, cmd)
    return pb.AllocatePidBlockResponse(
        header=coord.header(res.revision), start=res.start, size=res.size
    )


async def lease_pid(
    coord: Coordinator, caller: Caller, req: pb.LeasePidRequest
) -> pb.LeasePidResponse:
    # The serving member draws the random starting generation and puts it in the
    # command: apply itself never draws randomness.
    cmd = c.LeasePid(
        req.topic,
        req.partition,
        req.pid if req.pid else -1,
        random_generation=secrets.randbelow(2**31 - 1) + 1,
        request_id=req.request_id,
    )
    # lease_pid answers its own errors in-band, as the proposal's lease_pid_response does.
    res = await commit(coord, caller, cmd, in_band=True)
    return pb.LeasePidResponse(
        header=coord.header(res.revision),
        error=res.error,
        pid=res.pid,
        generation=res.generation,
        sequence_number=res.sequence_number,
        expire_ms=res.expire_ms,
    )


async def init_producer(
    coord: Coordinator, caller: Caller, req: pb.InitProducerRequest
) -> pb.InitProducerResponse:
    res = await commit(coord, caller, c.InitProducer(req.producer_key, req.request_id))
    return pb.InitProducerResponse(
        header=coord.header(res.revision), pid=res.pid, generation=res.generation
    )


async def check_producer(
    coord: Coordinator, caller: Caller, req: pb.CheckProducerRequest
) -> pb.CheckProducerResponse:
    await query(coord, caller, c.CheckProducer(req.producer_key, req.pid, req.generation))
    return pb.CheckProducerResponse(header=coord.header())


OPS: dict[str, Op] = {
    "put": put,
    "range": range_,
    "delete_range": delete_range,
    "txn": txn,
    "put_if_absent": put_if_absent,
    "compare_and_set": compare_and_set,
    "own": own,
    "release": release,
    "get_owner": get_owner,
    "list_owners": list_owners,
    "allocate_pid_block": allocate_pid_block,
    "lease_pid": lease_pid,
    "init_producer": init_producer,
    "check_producer": check_producer,
}
"""Every operation the pipelined stream carries, by its PipelineOp field name."""


def unary(op: Op) -> Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    """`op` as the unary RPC's method of a servicer holding `coord`: the call is served by
    the code the pipelined stream serves the operation with, an ApiError aborting it."""

    async def method(servicer: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        caller = Caller.of(context, request.ByteSize())
        return await serve(context, op(servicer.coord, caller, request))

    return method
