"""A follower's keepalives go to the leader in batches (server/forward/session_asks.py):
asks that arrive while calls are out share the next call; a failed call or a late
answer is None (the keepalive says `pending`), never a guess."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from coord.server.forward import session_asks
from coord.server.forward.service import ForwardService
from coord.server.forward.session_asks import MAX_IN_FLIGHT, MIN_GAP_S, SessionAsks
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as stubs

T = 10.0


class Leader:
    """Answers each batch after `delay` s: ttl = 1000 + id (id 0: cannot tell; 13: gone)."""

    def __init__(self, delay: float = 0.01, fail: bool = False) -> None:
        self.delay, self.fail = delay, fail
        self.calls: list[list[int]] = []
        self.out = self.most_out = 0

    async def __call__(self, ids: list[int]) -> list[int]:
        self.calls.append(ids)
        self.out += 1
        self.most_out = max(self.most_out, self.out)
        try:
            await asyncio.sleep(self.delay)
            if self.fail:
                raise ConnectionError("leader went away")
            return [0 if i == 0 else -1 if i == 13 else 1000 + i for i in ids]
        finally:
            self.out -= 1


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, T))


def test_asks_that_arrive_together_share_calls_and_each_gets_its_own_answer():
    leader = Leader()

    async def main():
        asks = SessionAsks(leader)
        return await asyncio.gather(*(asks.ask(i, 5.0) for i in range(1, 1001)))

    answers = _run(main())
    assert answers == [-1 if i == 13 else 1000 + i for i in range(1, 1001)]
    assert sorted(i for call in leader.calls for i in call) == list(range(1, 1001))
    # the first MAX_IN_FLIGHT go alone at once; the rest waited and went together
    assert len(leader.calls) <= MAX_IN_FLIGHT + 2
    assert leader.most_out <= MAX_IN_FLIGHT


def test_a_lone_ask_goes_at_once():
    leader = Leader(delay=0)

    async def main():
        return await SessionAsks(leader).ask(7, 5.0)

    assert _run(main()) == 1007 and leader.calls == [[7]]


def test_a_steady_trickle_goes_in_few_calls_even_to_a_fast_leader():
    """Asks arriving one every 2 ms to a leader that answers at once: calls start at
    most every MIN_GAP_S of the loop's clock, not one per ask (a call costs the leader
    far more than an id in it): about 20 over 0.2 s, however long the trickle takes."""
    leader = Leader(delay=0)

    async def main():
        loop = asyncio.get_running_loop()
        began = loop.time()  # no call can start before this
        asks = SessionAsks(leader)
        pending = []
        for i in range(1, 101):
            pending.append(asyncio.create_task(asks.ask(i, 5.0)))
            await asyncio.sleep(0.002)
        answers = await asyncio.gather(*pending)
        return answers, loop.time() - began  # no call started after the last answer

    answers, elapsed = _run(main())
    assert answers == [-1 if i == 13 else 1000 + i for i in range(1, 101)]
    assert len(leader.calls) <= elapsed / MIN_GAP_S + 1, (len(leader.calls), elapsed)


def test_the_queue_is_bounded_while_the_leader_does_not_answer(monkeypatch):
    """A leader that hangs: asks pile up only to MAX_WAITING. Past it, asks whose askers
    gave up are dropped; while every queued one is still waited on, a new ask is
    answered None at once."""
    monkeypatch.setattr(session_asks, "MAX_WAITING", 50)
    leader = Leader(delay=3.0)

    async def main():
        asks = SessionAsks(leader)
        asks.ask_soon(1, 0.01)  # the call that hangs
        await asyncio.sleep(0)
        fill = [asks.ask_soon(i, 0.02) for i in range(2, 52)]
        refused = asks.ask_soon(99, 5.0)
        assert refused.done() and refused.result() is None
        assert await asyncio.gather(*fill) == [None] * 50  # their askers gave up
        kept = asks.ask_soon(100, 5.0)
        assert not kept.done() and [sid for sid, _ in asks._queue] == [100]
        await asks.close()

    _run(main())


def test_batches_are_bounded(monkeypatch):
    monkeypatch.setattr(session_asks, "MAX_IDS", 10)
    leader = Leader()

    async def main():
        asks = SessionAsks(leader)
        await asyncio.gather(*(asks.ask(i, 5.0) for i in range(1, 101)))

    _run(main())
    assert max(len(c) for c in leader.calls) == 10 and sum(map(len, leader.calls)) == 100


def test_failed_calls_unknown_ids_and_late_answers_are_none():
    async def main():
        failed = await SessionAsks(Leader(fail=True)).ask(5, 5.0)
        unknown = await SessionAsks(Leader()).ask(0, 5.0)
        late = await SessionAsks(Leader(delay=1.0)).ask(5, 0.05)
        return failed, unknown, late

    assert _run(main()) == (None, None, None)


def test_an_ask_whose_asker_gave_up_still_reaches_the_leader():
    """An asker told `pending` leaves its keepalive in the queue: it goes with the next
    call (dropping it left a busy cluster renewing nothing)."""
    leader = Leader(delay=0.2)

    async def main():
        asks = SessionAsks(leader)
        first = [asyncio.create_task(asks.ask(i, 5.0)) for i in (1, 2)]  # fill the calls
        await asyncio.sleep(0)
        assert await asks.ask(3, 0.02) is None  # queued behind them, gave up
        await asyncio.gather(*first)  # 2 was answered: the call that took 2 is over

    _run(main())
    assert any(3 in c for c in leader.calls), leader.calls


@pytest.fixture
def forwarded(monkeypatch) -> list[int]:
    """The size of each Forward.KeepAlive call a leader serves, each answered 5 ms late:
    a leader a real network (or load) away, which the in-process members are not
    (patched before the cluster starts: gRPC binds the handler when the service is
    added)."""
    sizes: list[int] = []
    serve = ForwardService.KeepAlive

    async def counted(self, request, context):
        sizes.append(len(request.session_ids))
        await asyncio.sleep(0.005)
        return await serve(self, request, context)

    monkeypatch.setattr(ForwardService, "KeepAlive", counted)
    return sizes


# slow, left to `make test-slow`: the batching's unit tests are in make test
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.coord_cluster(members=3)
def test_many_keepalives_on_a_follower_reach_the_leader_in_few_calls(forwarded, coord_cluster):
    n = 1000
    members = list(coord_cluster.members.values())
    deadline = time.monotonic() + T
    while not any(m.embedded.member.node.is_leader for m in members):
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.02)
    leader = next(m for m in members if m.embedded.member.node.is_leader)
    follower = next(m for m in members if m is not leader)
    with grpc.insecure_channel(leader.listen) as ch:
        opened = stubs.SessionsStub(ch)
        ids = [opened.OpenSession(pb.OpenSessionRequest(ttl_ms=30_000), timeout=T).session_id
               for _ in range(n)]
    forwarded.clear()
    renewed: dict[int, int] = {}
    with grpc.insecure_channel(follower.listen) as ch:
        for _ in range(5):  # a keepalive answered `pending` (leader too slow) goes again
            todo = [sid for sid in ids if sid not in renewed]
            if not todo:
                break
            answers = stubs.SessionsStub(ch).KeepAlive(
                iter([pb.KeepAliveRequest(session_id=sid) for sid in todo]), timeout=T)
            for a in answers:
                assert not a.gone, a
                if not a.pending:
                    renewed[a.session_id] = a.ttl_ms
    assert renewed == {sid: 30_000 for sid in ids}
    assert sum(forwarded) >= n
    assert len(forwarded) <= n // 10, f"{len(forwarded)} calls for {n} keepalives"
