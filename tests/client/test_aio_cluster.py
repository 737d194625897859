"""The asyncio client (`AsyncClient`) against real `coord serve` processes on 127.0.0.1:
KV and transactions, a session kept alive and severed by a takeover, PID blocks across
a leader kill, a watch, WatchOwners replaying history, and failover when the member the
client uses is killed.

Each test is a plain function running one coroutine under `asyncio.run` with an overall
time limit (no pytest plugin); blocking cluster helpers run in a thread so the client's
background tasks keep running meanwhile."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from coord.client import AsyncClient
from coord.client.errors import OwnedByHigherGenerationError
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster

TEST_LIMIT_S = 90.0
TTL_S = 2.0


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), TEST_LIMIT_S))


async def next_item(stream: Any, limit_s: float = 10.0) -> Any:
    """The stream's next item, or a failure after `limit_s`."""
    return await asyncio.wait_for(stream.__anext__(), limit_s)


async def until(predicate: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {limit_s}s")
        await asyncio.sleep(0.02)


async def stays_live(session: Any, seconds: float) -> None:
    """Fail if the session is fenced at any point during the next `seconds`."""
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.fenced.wait(), seconds)


def test_put_get_and_txn(cluster3: LocalCluster):
    async def main() -> None:
        async with AsyncClient(cluster3.endpoints) as client:
            put = await client.put("cfg/a", "1")
            kv = await client.get("cfg/a")
            assert kv is not None and kv.value == b"1" and kv.mod_revision == put.header.revision
            assert await client.get("cfg/missing") is None

            created = await (client.txn().if_version("cfg/b", "=", 0)
                             .then_put("cfg/b", "first").else_get("cfg/b").commit())
            assert created.succeeded
            again = await (client.txn().if_version("cfg/b", "=", 0)
                           .then_put("cfg/b", "second").else_get("cfg/b").commit())
            assert not again.succeeded and again.responses[0].kvs[0].value == b"first"
            listed = await client.range(prefix="cfg/")
            assert [kv.key for kv in listed.kvs] == [b"cfg/a", b"cfg/b"]

    run(main)


def test_session_keepalive_own_and_severed_by_a_higher_generation(cluster3: LocalCluster):
    async def main() -> None:
        severed: list = []
        async with AsyncClient(cluster3.endpoints) as client:
            async with client.session(name="old", ttl=TTL_S, on_severed=severed.append) as old:
                grant = (await old.own("orders", [("p0", 1)])).grants[0]
                assert grant.generation == 1
                await stays_live(old, 3 * TTL_S)  # only keepalives keep it past its TTL
                owner = await client.get_owner("orders", "p0")
                assert owner.session_id == old.id and owner.generation == 1

                async with client.session(name="new", ttl=TTL_S) as new:
                    res = await new.own("orders", [("p0", 5)])  # 1 <= 5: takeover
                    assert res.grants[0].generation == 6 and old.id in res.severed
                    await asyncio.wait_for(old.fenced.wait(), 5.0)
                    await until(lambda: severed, 5.0, "on_severed called")
                    assert [e.type for e in severed] == ["severed"]
                    ev = severed[0]
                    assert (ev.session_id, ev.new_owner, ev.resource, ev.generation) == (
                        old.id, new.id, "p0", 6)
                    owner = await client.get_owner("orders", "p0")
                    assert owner.session_id == new.id and owner.generation == 6
                    async with client.session(name="late", ttl=TTL_S) as late:
                        with pytest.raises(OwnedByHigherGenerationError) as err:
                            await late.own("orders", [("p0", 3)])  # 6 > 3: refused
                        assert (err.value.owner, err.value.generation) == (new.id, 6)
        assert len(severed) == 1  # told once, and closing the severed session is quiet

    run(main)


def test_pid_blocks_stay_disjoint_across_a_leader_kill(cluster3: LocalCluster):
    async def main() -> None:
        blocks: list[tuple[int, int]] = []
        async with AsyncClient(cluster3.endpoints, timeout=5.0) as client:

            async def allocate(n: int) -> None:
                for _ in range(n):
                    b = await client.allocate_pid_block("writer", 100)
                    assert b.size == 100
                    blocks.append((b.start, b.start + b.size))

            await allocate(20)
            leader = await asyncio.to_thread(cluster3.wait_for_leader)
            await asyncio.to_thread(cluster3.kill, leader)
            await allocate(10)  # may land while there is no leader: retried, same block
            await asyncio.to_thread(cluster3.start_member, leader)
            await allocate(10)
        assert len(blocks) == 40
        for (s1, e1), (s2, _) in zip(blocks, blocks[1:], strict=False):
            assert e1 <= s2, f"blocks overlap or go backwards: [{s1},{e1}) then [{s2},...)"

    run(main)


def test_watch_receives_events_in_order(cluster3: LocalCluster):
    async def main() -> None:
        async with AsyncClient(cluster3.endpoints) as client:
            before = await client.put("jobs/0", "old")
            async with client.watch(prefix="jobs/") as stream:
                # from_revision 0 is pinned to "now": the earlier put is not replayed
                first = await client.put("jobs/1", "a")
                await client.delete("jobs/0")
                got = [await next_item(stream) for _ in range(2)]
                assert [(e.type, e.kv.key) for e in got] == [("PUT", b"jobs/1"),
                                                              ("DELETE", b"jobs/0")]
                assert got[0].revision == first.header.revision
            async with client.watch(prefix="jobs/", from_revision=before.header.revision,
                                    prev_kv=True) as past:
                replay = [await next_item(past) for _ in range(3)]
                assert [e.kv.key for e in replay] == [b"jobs/0", b"jobs/1", b"jobs/0"]
                assert replay[2].prev_kv is not None and replay[2].prev_kv.value == b"old"

    run(main)


def test_watch_owners_replays_from_a_past_revision(cluster3: LocalCluster):
    async def main() -> None:
        async with AsyncClient(cluster3.endpoints) as client:
            async with client.session(name="router-owner", ttl=TTL_S) as s:
                r1 = (await s.own("routes", [("p0", 1)])).header.revision
                r2 = (await s.release("routes", ["p0"])).header.revision
                r3 = (await s.own("routes", [("p0", 1)])).header.revision
                async with client.watch_owners("routes", from_revision=r1) as stream:
                    got = [await next_item(stream) for _ in range(3)]
                    r4 = (await s.release("routes", ["p0"])).header.revision
                    got.append(await next_item(stream))
            assert [(ch.kind, ch.owner.session_id, ch.owner.generation, ch.owner.revision)
                    for ch in got] == [("grant", s.id, 1, r1), ("release", 0, 1, r2),
                                       ("grant", s.id, 2, r3), ("release", 0, 2, r4)]

    run(main)


def test_failover_when_the_connected_member_is_killed(cluster3: LocalCluster):
    """The client's member (the leader, so an election must happen too) is killed under
    a live session and an open watch: calls move to another member, the session keeps
    its id and is never fenced, and the watch resumes with no loss and no repeat."""

    async def main() -> None:
        leader = await asyncio.to_thread(cluster3.wait_for_leader)
        others = [n for n in cluster3.members if n != leader]
        order = [cluster3.members[n].listen for n in [leader, *others]]
        async with AsyncClient(order, timeout=5.0, randomize_endpoints=False) as client:
            assert (await client.put("f/0", "0")).header.member == leader
            async with client.session(name="survivor", ttl=TTL_S) as s:
                await s.own("g", [("keep", 1)])
                async with client.watch(prefix="f/") as stream:
                    await client.put("f/1", "1")
                    assert (await next_item(stream)).kv.key == b"f/1"
                    await asyncio.to_thread(cluster3.kill, leader)
                    moved = await client.put("f/2", "2")
                    assert moved.header.member in others
                    await client.put("f/3", "3")
                    got = [await next_item(stream) for _ in range(2)]
                    assert [e.kv.key for e in got] == [b"f/2", b"f/3"]
                    assert got[0].revision == moved.header.revision
                    await stays_live(s, 2 * TTL_S)  # keepalives moved with the client
                owner = await client.get_owner("g", "keep")
                assert owner.session_id == s.id and owner.generation == 1
                assert (await client.get("f/3")).value == b"3"

    run(main)
