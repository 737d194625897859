"""The sessions and producers tables as streams (Admin.WatchSessions/WatchProducers),
against a real 3-member cluster: what changes reaches the console's views through the
streams alone (the list RPCs are made to fail, so a poll would show nothing), and a
stream whose member is killed resumes on another one with no row lost or repeated —
changes made while it was down included."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

import pytest

from coord.client import AsyncClient
from coord.client.admin_aio import AsyncAdmin
from coord.tui.app import CoordApp
from coord.tui.model import ClusterModel
from tests.conftest import _module_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    """One 3-member cluster for this module (the failover test, last, kills a member):
    starting clusters is what costs time on a 2-core machine."""
    yield from _module_cluster(tmp_path_factory, "table-streams")

TEST_LIMIT_S = 90.0
SEEN_S = 10.0  # a bound for a loaded machine: no poll shows anything (see no_polls)


async def until(predicate: Callable[[], bool], limit_s: float, what: str,
                pause: Callable[[], object] | None = None) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > limit_s:
            raise AssertionError(f"{what}: not within {limit_s}s")
        await (pause() if pause is not None else asyncio.sleep(0.02))
    return time.monotonic() - start


def no_polls(monkeypatch) -> None:
    async def refused(*args, **kwargs):
        raise AssertionError("the console read a table instead of following its stream")
    monkeypatch.setattr(AsyncAdmin, "list_sessions", refused)
    monkeypatch.setattr(AsyncAdmin, "list_producers", refused)


def test_views_follow_the_streams(cluster3, monkeypatch):
    no_polls(monkeypatch)

    async def main() -> None:
        async with AsyncClient(cluster3.endpoints) as client, \
                AsyncClient(cluster3.endpoints, read_only_ok=True) as console:
            app = CoordApp(client=console, start_view="sessions")
            async with app.run_test(size=(140, 40)) as pilot:
                m = app.model

                def pause():
                    return pilot.pause(0.02)
                shown = app.views["sessions"]._ids
                await until(lambda: "sessions" in m._listed and "producers" in m._listed,
                            10, "the first listings", pause)

                s = await client.session("streamed", ttl=30)
                took = await until(lambda: str(s.id) in shown, SEEN_S, "opened", pause)
                print(f"session opened → row: {took * 1000:.0f} ms")
                # the stream is (re)opened at the leader: only it knows the time left
                await until(lambda: m.sessions.get(s.id).remaining_ms > 0, SEEN_S,
                            "time left from the leader", pause)
                await client.put("bound", "x", session=s)
                await until(lambda: m.sessions.get(s.id).keys == (b"bound",), SEEN_S,
                            "a key bound", pause)
                await s.close()
                took = await until(lambda: str(s.id) not in shown, SEEN_S, "closed", pause)
                print(f"session closed → row gone: {took * 1000:.0f} ms")

                app.show_view("producers")
                lease = await client.lease_pid("orders", 3)
                sides = app.views["producers"]._side_ids
                took = await until(lambda: str(lease.pid) in sides["pid-leases"], SEEN_S,
                                   "pid leased", pause)
                print(f"pid leased → row: {took * 1000:.0f} ms")
                first = await client.init_producer("tx-1")
                await until(lambda: m.producers.producers.get("tx-1") == ("tx-1", first.pid, 0),
                            SEEN_S, "producer", pause)
                await client.init_producer("tx-1")  # the epoch bump fences the first
                table = app.views["producers"].data_table

                def drawn() -> list:
                    return list(table.get_row("tx-1")) if "tx-1" in shown_producers else []
                shown_producers = app.views["producers"]._ids
                await until(lambda: drawn() == ["tx-1", first.pid, 1], SEEN_S,
                            "epoch bumped", pause)
                texts = [e.text for e in m.events]
                assert sum(f"session {s.id} " in t and "opened" in t for t in texts) == 1
                assert sum(f"session {s.id} " in t and "ended: released" in t
                           for t in texts) == 1

    asyncio.run(asyncio.wait_for(main(), TEST_LIMIT_S))


def test_streams_resume_on_another_member(cluster3):
    async def main() -> None:
        model = ClusterModel()
        async with AsyncClient(cluster3.endpoints) as client, \
                AsyncClient(cluster3.endpoints, read_only_ok=True) as console:
            admin = AsyncAdmin(console)
            sessions, producers = admin.watch_sessions(), admin.watch_producers()
            served: list[str] = []
            indexes: list[tuple[str, int]] = []
            opened = collections.Counter()

            async def follow_sessions() -> None:
                async for c in sessions:
                    served.append(c.member)
                    indexes.append((c.kind, c.index))
                    if c.kind == "upsert" and not c.snapshot \
                            and c.session.id not in model.sessions.rows:
                        opened[c.session.id] += 1
                    model.session_change(c)

            async def follow_producers() -> None:
                async for c in producers:
                    model.producer_change(c)

            tasks = [asyncio.create_task(follow_sessions()),
                     asyncio.create_task(follow_producers())]
            try:
                before = [await client.session(f"before-{i}", ttl=30) for i in range(3)]
                leased = [await client.lease_pid("t", i) for i in range(2)]
                await until(lambda: all(s.id in model.sessions.rows for s in before)
                            and all(x.pid in model.producers.leases.rows for x in leased),
                            10, "the rows before the kill")
                victim = served[-1]
                cut = len(indexes)
                cluster3.kill(victim)
                # changes while the stream has no member: it must still learn them
                await before[0].close()
                during = await client.session("during", ttl=30)
                bumped = await client.init_producer("tx-during")
                after = await client.session("after", ttl=30)
                rows = model.sessions.rows
                await until(lambda: before[0].id not in rows and during.id in rows
                            and after.id in rows
                            and "tx-during" in model.producers.producers.rows, 20,
                            "the tables after the failover")
                assert all(s.id in rows for s in before[1:])
                assert any(m != victim for m in served[cut:]), "not served by another member"
                # the index never went back: the new member waited until it had applied
                # what the stream had seen before listing again
                assert min(i for _, i in indexes[cut:]) >= max(i for _, i in indexes[:cut])
                assert model.producers.producers.get("tx-during") == (
                    "tx-during", bumped.pid, 0)
                assert {x.pid for x in leased} <= set(model.producers.leases.rows)
                # each session appeared once as news, none twice (relisting is not news)
                assert all(n == 1 for n in opened.values()), opened
                texts = [e.text for e in model.events]
                assert sum(f"session {before[0].id} " in t and "ended" in t
                           for t in texts) == 1
                truth = {d.id for d in (await admin.list_sessions()).sessions}
                assert truth == set(model.sessions.rows)
            finally:
                sessions.cancel()
                producers.cancel()
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), TEST_LIMIT_S))
