"""`coord tui` driven by textual's pilot against a real 3-member cluster of `coord serve`
processes: every view reached with `:`, a filter and its inverse, drill-down from an
owner to its session and back, each kind of action confirmed and seen in the cluster,
a claim's row appearing (its latency printed), two members SIGSTOPped and the banner
shown, and the leader killed with the members view naming the new one."""

from __future__ import annotations

import asyncio
import time

import pytest

from coord.client import AsyncClient
from coord.tui.app import CoordApp
from coord.tui.views import OwnersView
from tests.tui.pilot import command, confirm, until

pytestmark = pytest.mark.cluster

TEST_LIMIT_S = 120.0
SEEN_S = 10.0  # the longest a change may take to show: a bound for a loaded machine


async def filter_view(pilot, app: CoordApp, text: str) -> None:
    await pilot.press("slash")
    app.query_one("#prompt").value = text
    await pilot.press("enter")
    await pilot.pause(0.05)


def shown(app: CoordApp, view: str) -> set:
    return set(app.views[view]._ids.values())


@pytest.mark.slow
def test_console_on_a_live_cluster(cluster3):
    async def main() -> None:
        async with AsyncClient(cluster3.endpoints) as client, \
                AsyncClient(cluster3.endpoints, read_only_ok=True) as console:
            s = await client.session("worker-a", ttl=30)
            await client.own(s, "jobs", ["j1", "j2"])
            await client.put("cfg/a", '{"x": 1}')
            await client.put("cfg/b/c", "hello")
            app = CoordApp(client=console)
            async with app.run_test(size=(140, 40)) as pilot:
                m = app.model
                await until(pilot, lambda: len(m.members) == 3 and m.leader() is not None
                            and len(m.owners) == 2 and len(m.keys) == 2
                            and s.id in m.sessions.rows, SEEN_S, "the first picture")
                assert app.banner.has_class("shown") is False

                for name in ("sessions", "owners", "pids", "keys", "events", "members"):
                    await command(pilot, app, name)
                    assert app.view_name == ("producers" if name == "pids" else name)
                await command(pilot, app, "nosuchview")
                assert "unknown command" in app.last_message and app.view_name == "members"

                # a claim's row appears, live
                await command(pilot, app, "owners")
                t0 = time.monotonic()
                await client.own(s, "jobs", ["j3"])
                await until(pilot, lambda: ("jobs", "j3") in shown(app, "owners"), SEEN_S, "claim")
                print(f"claim → row: {(time.monotonic() - t0) * 1000:.0f} ms")

                # filter, inverted filter, esc clears
                await filter_view(pilot, app, "j3")
                assert shown(app, "owners") == {("jobs", "j3")}
                await filter_view(pilot, app, "!j3")
                assert shown(app, "owners") == {("jobs", "j1"), ("jobs", "j2")}
                await pilot.press("escape")
                assert len(shown(app, "owners")) == 3

                # drill down: owner → its session → that session's owners; esc goes back
                owners: OwnersView = app.views["owners"]
                owners.select(("jobs", "j1"))
                await pilot.press("enter")
                assert app.view_name == "sessions" and app.views["sessions"].current().id == s.id
                await pilot.press("enter")
                assert app.view_name == "owners" and owners.scope is not None
                assert shown(app, "owners") == {("jobs", "j1"), ("jobs", "j2"), ("jobs", "j3")}
                await pilot.press("escape")
                assert owners.scope is None

                # release j3 (marked rows: mark j3 alone)
                owners.select(("jobs", "j3"))
                question = await confirm(pilot, app, "ctrl+d")
                assert "Release jobs/j3" in question
                await until(pilot, lambda: ("jobs", "j3") not in m.owners.rows, SEEN_S, "release")
                assert (await client.get_owner("jobs", "j3")).session_id == 0

                # force-claim j2 with generation 0: worker-a is severed (its session ends,
                # freeing j1 too), and the console's own session holds j2
                owners.select(("jobs", "j2"))
                question = await confirm(pilot, app, "f")
                assert "Force-claim jobs/j2" in question and "severed" in question
                await until(pilot, lambda: m.owners.rows.get(("jobs", "j2")) is not None
                            and m.owners.rows[("jobs", "j2")].session_id != s.id, SEEN_S, "force")
                console_sid = (await client.get_owner("jobs", "j2")).session_id
                assert console_sid not in (0, s.id)
                await until(pilot, lambda: s.id not in m.sessions.rows
                            and ("jobs", "j1") not in m.owners.rows, SEEN_S, "severed")
                assert (await client.get_owner("jobs", "j1")).session_id == 0

                # keys: put a new key, delete it, compact
                await command(pilot, app, "keys")
                await pilot.press("n")
                await pilot.pause(0.1)
                app.screen.query_one("#field-key").value = "cfg/new"
                app.screen.query_one("#field-value").value = "42"
                await pilot.press("enter", "enter")
                await pilot.pause(0.1)
                assert "Put 'cfg/new'" in str(app.screen.query_one("#question").render())
                await pilot.press("y")
                await until(pilot, lambda: b"cfg/new" in m.keys.rows, SEEN_S, "put")
                assert (await client.get("cfg/new")).value == b"42"
                keys = app.views["keys"]
                folder = next(n for n in _walk(keys.tree.root) if n.data == ("dir", "cfg/"))
                folder.expand()
                await pilot.pause(0.1)
                node = next(n for n in _walk(keys.tree.root) if n.data == ("key", "cfg/new"))
                keys.tree.move_cursor(node)
                await pilot.pause(0.05)
                assert "Delete key 'cfg/new'" in await confirm(pilot, app, "ctrl+d")
                await until(pilot, lambda: b"cfg/new" not in m.keys.rows, SEEN_S, "delete")
                assert await client.get("cfg/new") is None
                revision = m.revision
                assert f"revision {revision}" in await confirm(pilot, app, "c")
                await until(pilot, lambda: "compacted" in app.last_message, SEEN_S, "compact")

                # close the session holding j2: j2 is freed
                await command(pilot, app, "sessions")
                assert app.views["sessions"].select(console_sid)
                assert f"Close session(s) {console_sid}" in await confirm(pilot, app, "ctrl+d")
                await until(pilot, lambda: ("jobs", "j2") not in m.owners.rows, SEEN_S, "close")
                assert (await client.get_owner("jobs", "j2")).session_id == 0

                # transfer leadership to a follower
                await command(pilot, app, "members")
                old = m.leader()
                target = next(r for r in m.members.rows.values() if r.name != old.name)
                app.views["members"].select(target.name)
                assert f"Transfer leadership to {target.name}" in await confirm(pilot, app, "t")
                await until(pilot, lambda: m.leader() is not None
                            and m.leader().name == target.name, SEEN_S, "transfer")

                # two members paused: the member the console talks to has no quorum
                serving = m.member_for(m.serving)
                others = [r.name for r in m.members.rows.values() if r.name != serving.name]
                for name in others:
                    cluster3.pause(name)
                try:
                    await until(pilot, lambda: "QUORUM" in m.trouble()
                                or "READ-ONLY" in m.trouble(), SEEN_S, "no quorum seen")
                    await until(pilot, lambda: app.banner.has_class("shown"), SEEN_S, "banner")
                    print("banner:", m.trouble())
                    assert app.gate.refusal() is not None  # read-only by itself
                finally:
                    for name in others:
                        cluster3.resume(name)
                await until(pilot, lambda: not app.banner.has_class("shown"), 15, "healed")

                # the leader killed: the members view names the new one
                leader = m.leader()
                cluster3.kill(leader.name)
                new = await asyncio.to_thread(cluster3.wait_for_leader, 15.0)
                assert new != leader.name
                took = await until(pilot, lambda: m.leader() is not None
                                   and m.leader().name == new
                                   and app.views["members"].data_table.get_row(new)[2].plain
                                   == "leader", SEEN_S, "new leader shown")
                print(f"new leader {new} shown {took * 1000:.0f} ms after it was found")

    asyncio.run(asyncio.wait_for(main(), TEST_LIMIT_S))


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)
