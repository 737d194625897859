"""The pipelined stream (`Pipeline.Stream`) on real `coord serve` processes: answers out
of order and batched, a cancel honoured by the member, errors identical to the unary
RPCs', per-request cancellation and deadlines in the client, a stream's member killed
under load (every operation lands once, on another member), and a stream on a member
that goes read-only when the others are SIGSTOPped, and a follower's forwarding stream
to a leader that is killed.

The raw-stub tests talk to `Pipeline.Stream` directly, to see the messages themselves;
the rest go through `AsyncClient`, which uses the stream by default."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest

from coord.client import AsyncClient, NoQuorumError, ReadOnlyError
from coord.client.calls import txn_call
from coord.client.errors import (
    CoordError,
    DeadlineError,
    InvalidArgumentError,
    OwnedByHigherGenerationError,
    SessionGoneError,
)
from coord.testing import LocalCluster
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as pb_grpc

pytestmark = pytest.mark.cluster

TEST_LIMIT_S = 90.0


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), TEST_LIMIT_S))


class RawStream:
    """`Pipeline.Stream` on a raw stub: send PipelineRequests, read PipelineResponses."""

    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.aio.insecure_channel(endpoint)
        self.queue: asyncio.Queue[pb.PipelineRequest | None] = asyncio.Queue()
        self.call = pb_grpc.PipelineStub(self.channel).Stream(self._requests())

    async def _requests(self) -> AsyncIterator[pb.PipelineRequest]:
        while (request := await self.queue.get()) is not None:
            yield request

    def send(self, *ops: pb.PipelineOp) -> None:
        self.queue.put_nowait(pb.PipelineRequest(ops=ops))

    async def receive(self, limit_s: float = 10.0) -> pb.PipelineResponse:
        return await asyncio.wait_for(self.call.read(), limit_s)

    async def close(self) -> None:
        self.queue.put_nowait(None)
        await self.channel.close()


def put_op(op_id: int, key: str, value: str = "v") -> pb.PipelineOp:
    return pb.PipelineOp(id=op_id, put=pb.PutRequest(key=key.encode(), value=value.encode(),
                                                     request_id=f"raw-{key}-{op_id}"))


def test_answers_out_of_order_and_batched(shared_cluster3: LocalCluster):
    """A serializable read sent after a write in one message is answered first (the
    write waits for Raft; the read does not); 40 puts in one message are all applied,
    at consecutive revisions, and answered in far fewer messages than 40."""

    async def main() -> None:
        leader = await asyncio.to_thread(shared_cluster3.wait_for_leader)
        raw = RawStream(shared_cluster3.members[leader].listen)
        try:
            raw.send(put_op(1, "ooo/a"),
                     pb.PipelineOp(id=2, range=pb.RangeRequest(key=b"ooo/a", serializable=True)))
            first = await raw.receive()
            assert first.results[0].id == 2 and first.results[0].WhichOneof("response") == "range"
            answered = {r.id for r in first.results}
            while 1 not in answered:
                answered |= {r.id for r in (await raw.receive()).results}

            raw.send(*(put_op(100 + i, f"batch/{i}") for i in range(40)))
            revisions: dict[int, int] = {}
            messages = 0
            while len(revisions) < 40:
                response = await raw.receive()
                messages += 1
                for r in response.results:
                    assert r.WhichOneof("response") == "put", r
                    revisions[r.id] = r.put.header.revision
            assert sorted(revisions) == list(range(100, 140))
            revs = sorted(revisions.values())
            assert revs == list(range(revs[0], revs[0] + 40))
            assert messages <= 10, f"40 answers took {messages} messages"
        finally:
            await raw.close()

    run(main)


def test_a_cancel_in_the_same_message_stops_the_operation(shared_cluster3: LocalCluster):
    """A put cancelled in the message that carries it is never applied nor answered; the
    stream goes on serving (and an operation with no request is an error, in-band)."""

    async def main() -> None:
        leader = await asyncio.to_thread(shared_cluster3.wait_for_leader)
        raw = RawStream(shared_cluster3.members[leader].listen)
        try:
            raw.send(put_op(1, "cancel/x"), pb.PipelineOp(id=1, cancel=True),
                     pb.PipelineOp(id=2))
            bad = await raw.receive()
            assert [r.id for r in bad.results] == [2]
            assert bad.results[0].error.reason == "INVALID_ARGUMENT"
            raw.send(pb.PipelineOp(id=3, range=pb.RangeRequest(key=b"cancel/x")))
            got = await raw.receive()
            assert [r.id for r in got.results] == [3]
            assert got.results[0].range.count == 0  # the cancelled put never happened
        finally:
            await raw.close()

    run(main)


async def _error_of(call: Awaitable[object]) -> CoordError:
    with pytest.raises(CoordError) as info:
        await call
    return info.value


def test_errors_match_the_unary_rpcs(shared_cluster3: LocalCluster):
    """The same refusals through the stream and through unary calls: same class,
    reason, code and ErrorInfo metadata."""

    async def main() -> None:
        async with AsyncClient(shared_cluster3.endpoints) as streamed, \
                AsyncClient(shared_cluster3.endpoints, stream=False) as unary:
            holder = await streamed.open_session("holder", ttl=30)
            other = await streamed.open_session("other", ttl=30)
            await streamed.own(other.session_id, "errs", [("r", 1)])
            taken = await streamed.own(holder.session_id, "errs", [("r", 5)])  # a takeover
            assert taken.grants[0].generation == 6  # `other` is severed (gone)
            late = await streamed.open_session("late", ttl=30)
            got = {}
            for name, client in (("stream", streamed), ("unary", unary)):
                got[name] = [
                    await _error_of(client.own(holder.session_id + 999, "errs", "q")),
                    await _error_of(client.own(late.session_id, "errs", [("r", 2)])),
                    await _error_of(client.send(txn_call(pb.TxnRequest(  # the client checks
                        compares=[pb.Compare(key=b"k", target="version", op="~")],  # ops: raw
                        request_id=f"bad-txn-{name}")))),
                    await _error_of(client.compare_and_set("errs/k", -1, "v")),
                ]
            for s, u in zip(got["stream"], got["unary"], strict=True):
                assert (type(s), s.reason, s.code, s.metadata) == \
                       (type(u), u.reason, u.code, u.metadata)
            gone, conflict, bad_txn, bad_cas = got["stream"]
            assert isinstance(gone, SessionGoneError)
            assert isinstance(conflict, OwnedByHigherGenerationError)
            assert (conflict.resource, conflict.generation) == ("r", 6)
            assert conflict.owner == holder.session_id
            assert isinstance(bad_txn, InvalidArgumentError)
            assert isinstance(bad_cas, InvalidArgumentError)

    run(main)


def test_own_takes_claims_as_messages_or_as_columns(shared_cluster3: LocalCluster):
    """A unary Own with `claims` is answered with `grants`; with `claim_columns` (what the
    client library sends), with `grant_columns`, the two forms' claims taken together.
    Columns of different lengths are refused and claim nothing."""

    async def main() -> None:
        async with AsyncClient(shared_cluster3.endpoints) as client:
            session = await client.open_session("columns", ttl=30)
            sid = session.session_id
            async with grpc.aio.insecure_channel(shared_cluster3.endpoints[0]) as channel:
                own = pb_grpc.OwnershipStub(channel).Own
                plain = await own(pb.OwnRequest(
                    session_id=sid, group="cols", request_id="cols-1",
                    claims=[pb.Claim(resource="m1", generation=1)]), timeout=10)
                assert [(g.resource, g.generation) for g in plain.grants] == [("m1", 1)]
                assert not plain.HasField("grant_columns")
                both = await own(pb.OwnRequest(
                    session_id=sid, group="cols", request_id="cols-2",
                    claims=[pb.Claim(resource="m2", generation=1)],
                    claim_columns=pb.ClaimColumns(resources=["c1", "c2"], generations=[1, 0])),
                    timeout=10)
                assert list(both.grants) == []
                cols = both.grant_columns
                assert list(zip(cols.resources, cols.generations, cols.revisions,
                                strict=True)) == [("m2", 1, both.header.revision),
                                                  ("c1", 1, both.header.revision),
                                                  ("c2", 1, both.header.revision)]
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await own(pb.OwnRequest(
                        session_id=sid, group="cols", request_id="cols-3",
                        claim_columns=pb.ClaimColumns(resources=["x1", "x2"], generations=[1])),
                        timeout=10)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "they are pairs" in refused.value.details()
            assert (await client.get_owner("cols", "x1")).session_id == 0
            # The client library's own goes by columns and reads the columns back.
            got = await client.own(sid, "cols", ["c1", ("c3", 2)])
            assert [(g.resource, g.generation) for g in got.grants] == [("c1", 1), ("c3", 1)]

    run(main)


def test_client_cancellation_and_deadline(shared_cluster3: LocalCluster):
    """Cancelling the task awaiting a request takes it off the stream; a request that
    cannot finish in its timeout raises DeadlineError; the stream serves on after both."""

    async def main() -> None:
        leader = await asyncio.to_thread(shared_cluster3.wait_for_leader)
        endpoint = shared_cluster3.members[leader].listen
        async with AsyncClient([endpoint]) as client:
            await client.put("cc/warm", "1")
            pipeline = client._pipelines.get(endpoint, client.transport(endpoint))
            task = asyncio.ensure_future(client.put("cc/x", "1"))
            await asyncio.sleep(0)  # sent into the stream, not answered yet
            assert pipeline.in_flight == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert pipeline.in_flight == 0
            with pytest.raises(DeadlineError):
                await pipeline.call("put", pb.PutRequest(key=b"cc/y", value=b"1",
                                                         request_id="cc-y"), 0.0005)
            assert pipeline.in_flight == 0
            assert (await client.put("cc/z", "1")).header.member == leader

    run(main)


@pytest.mark.parametrize("via", ["leader", "follower"])
def test_stream_fails_over_when_the_leader_is_killed(cluster3: LocalCluster, via: str):
    """16 workers write through one stream, to the leader or to a follower (which
    forwards on its own stream to the leader); the leader is SIGKILLed mid-run. Every
    write completes (retried with its request id: by the client on another member, or
    by the follower to the new leader) and each is applied exactly once."""

    async def main() -> None:
        leader = await asyncio.to_thread(cluster3.wait_for_leader)
        others = [n for n in cluster3.members if n != leader]
        first = leader if via == "leader" else others[0]
        rest = [n for n in cluster3.members if n != first]
        order = [cluster3.members[n].listen for n in [first, *rest]]
        writes_per_worker = 40
        async with AsyncClient(order, timeout=5.0, randomize_endpoints=False) as client:
            members: dict[str, int] = {}
            killed = asyncio.Event()

            async def worker(w: int) -> None:
                for i in range(writes_per_worker):
                    res = await client.put(f"fo/{w}/{i}", f"{i}")
                    members[res.header.member] = members.get(res.header.member, 0) + 1
                    if w == 0 and i == 10:
                        await asyncio.to_thread(cluster3.kill, leader)
                        killed.set()

            await asyncio.gather(*(worker(w) for w in range(16)))
            assert killed.is_set()
            if via == "leader":  # answered by the leader, then by the others
                assert members.get(leader, 0) > 0 and set(members) - {leader}, members
            else:  # the follower forwarded (it may refuse NO_QUORUM during the election,
                # and the client then moves on: either way, never the dead leader)
                assert members.get(first, 0) > 0 and leader not in members, members
            listing = await client.range(prefix="fo/")
            assert listing.count == 16 * writes_per_worker
            assert all(kv.version == 1 for kv in listing.kvs)  # no write applied twice

    run(main)


def test_stream_on_a_member_that_goes_read_only(cluster3: LocalCluster):
    """The stream's member loses its quorum (the others SIGSTOPped): a read-only client
    is answered flagged reads and ReadOnlyError for writes on the same stream; a normal
    client gets NoQuorumError; once the others are back, writes go through again."""

    async def main() -> None:
        leader = await asyncio.to_thread(cluster3.wait_for_leader)
        survivor = next(n for n in cluster3.members if n != leader)
        others = [n for n in cluster3.members if n != survivor]
        endpoint = cluster3.members[survivor].listen
        async with AsyncClient([endpoint], read_only_ok=True, timeout=2.0) as ro, \
                AsyncClient([endpoint], timeout=1.0) as normal:
            written = await ro.put("ro/k", "v1")
            assert not written.header.read_only
            for name in others:
                await asyncio.to_thread(cluster3.pause, name)
            try:
                deadline = time.monotonic() + 15
                while True:  # until the survivor notices it is cut off
                    got = await ro.range("ro/k")
                    if got.header.read_only:
                        break
                    assert time.monotonic() < deadline, "never went read-only"
                    await asyncio.sleep(0.1)
                assert got.kvs[0].value == b"v1" and got.header.member == survivor
                with pytest.raises(ReadOnlyError):
                    await ro.put("ro/k", "v2")
                with pytest.raises(NoQuorumError):
                    await normal.get("ro/k")
            finally:
                for name in others:
                    await asyncio.to_thread(cluster3.resume, name)
            deadline = time.monotonic() + 20
            while True:
                try:
                    res = await ro.put("ro/k", "v3")
                except (ReadOnlyError, CoordError):
                    assert time.monotonic() < deadline, "never read-write again"
                    await asyncio.sleep(0.2)
                    continue
                break
            assert not res.header.read_only
            assert (await normal.get("ro/k")).value == b"v3"

    run(main)


def test_stream_moves_on_when_its_member_stops_gracefully(cluster3: LocalCluster):
    """SIGTERM to the stream's member (a follower): it ends its streams as it stops
    (UNAVAILABLE, with writes in flight on them), and every write in flight or after is
    retried elsewhere: all complete, each applied once."""

    async def main() -> None:
        leader = await asyncio.to_thread(cluster3.wait_for_leader)
        first = next(n for n in cluster3.members if n != leader)
        order = [cluster3.members[n].listen for n in [first, *(
            n for n in cluster3.members if n != first)]]
        async with AsyncClient(order, timeout=5.0, randomize_endpoints=False) as client:
            members: dict[str, int] = {}

            async def worker(w: int) -> None:
                for i in range(30):
                    res = await client.put(f"gs/{w}/{i}", f"{i}")
                    members[res.header.member] = members.get(res.header.member, 0) + 1
                    if w == 0 and i == 5:
                        proc = cluster3.members[first].proc
                        proc.terminate()
                        await asyncio.to_thread(proc.wait, 20)

            await asyncio.gather(*(worker(w) for w in range(8)))
            assert members.get(first, 0) > 0 and set(members) - {first}, members
            listing = await client.range(prefix="gs/")
            assert listing.count == 8 * 30
            assert all(kv.version == 1 for kv in listing.kvs)

    run(main)
