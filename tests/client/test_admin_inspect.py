"""The inspection RPCs an operator's console uses (Admin ListSessions, ListProducers,
WatchOwnership) through `AsyncAdmin`, against a real member: what each session holds,
the producer tables, and one stream of every group's owners (listing, marker, changes)."""

from __future__ import annotations

import asyncio

import pytest

from coord.client import AsyncClient
from coord.client.admin_aio import AsyncAdmin
from coord.testing import cluster

pytestmark = pytest.mark.cluster


def run(main) -> None:
    asyncio.run(asyncio.wait_for(main(), 60.0))


async def next_item(stream, limit_s: float = 10.0):
    return await asyncio.wait_for(stream.__anext__(), limit_s)


def test_sessions_producers_and_all_groups_watch():
    with cluster(members=1, in_process=True) as c:
        endpoint = c.endpoints[0]

        async def main() -> None:
            async with AsyncClient(c.endpoints) as client:
                admin = AsyncAdmin(client)
                a = await client.open_session("worker-a", ttl=30)
                b = await client.open_session("worker-b", ttl=30)
                await client.own(a.session_id, "jobs", ["j1", "j2"])
                await client.own(b.session_id, "shards", ["s1"])
                await client.put("locks/x", "1", session=b.session_id)

                st = await admin.status(endpoint)
                assert st.version and st.data_bytes > 0  # the SQLite file and its WAL

                listed = await admin.list_sessions(endpoint)
                assert listed.leader and listed.member
                by_id = {s.id: s for s in listed.sessions}
                sa, sb = by_id[a.session_id], by_id[b.session_id]
                assert (sa.name, sb.name) == ("worker-a", "worker-b")
                assert [(h.group, h.resource) for h in sa.owned] == [("jobs", "j1"),
                                                                   ("jobs", "j2")]
                assert list(sb.keys) == [b"locks/x"]
                assert 0 < sa.remaining_ms <= 30_000 and sa.ttl_ms == 30_000

                block = await client.allocate_pid_block("spark-1", 10)
                lease = await client.lease_pid("topic", 3)
                prod = await client.init_producer("tx-7")
                prods = await admin.list_producers()
                assert prods.next_pid > block.start + 9
                assert [(p.producer_key, p.pid, p.epoch) for p in prods.producers] == [
                    ("tx-7", prod.pid, prod.generation)]
                assert [(x.pid, x.topic, x.partition) for x in prods.leases] == [
                    (lease.pid, "topic", 3)]
                assert [(x.requester, x.start, x.size) for x in prods.blocks] == [
                    ("spark-1", block.start, 10)]

                stream = admin.watch_ownership()
                try:
                    seen = [await next_item(stream) for _ in range(4)]
                    assert [(x.group, x.owner.resource, x.snapshot) for x in seen[:3]] == [
                        ("jobs", "j1", True), ("jobs", "j2", True), ("shards", "s1", True)]
                    assert seen[3].kind == "listed"
                    await client.own(a.session_id, "new-group", ["r"])
                    grant = await next_item(stream)
                    assert (grant.group, grant.owner.resource, grant.kind) == (
                        "new-group", "r", "grant")
                    await client.close_session(b.session_id)
                    gone = await next_item(stream)
                    assert (gone.group, gone.owner.resource, gone.owner.session_id) == (
                        "shards", "s1", 0)
                finally:
                    stream.cancel()

        run(main)
