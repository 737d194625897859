"""The console without a cluster: the model's change tracking and banner, filters and
`:` commands, marking rows (one, a range, all filtered, none) and what an action over
them says, and the gate refusing every action on a --read-only console."""

from __future__ import annotations

import asyncio

import pytest

from coord.client import AsyncClient
from coord.tui import commands
from coord.tui.actions import Action, ActionGate, ActionRefused
from coord.tui.app import CoordApp
from coord.tui.format import Filter, value_text
from coord.tui.model import Table
from coord.tui.screens import ConfirmScreen
from tests.tui.fixtures import picture


def test_table_tracks_changed_rows_only():
    t: Table[str, int] = Table()
    t.put("a", 1)
    t.put("b", 2)
    assert t.take() == {"a", "b"} and t.take() == set()
    t.put("a", 1)  # unchanged: nothing to redraw
    assert t.take() == set()
    t.replace_all({"b": 3, "c": 4})
    assert t.take() == {"a", "b", "c"} and "a" not in t.rows


def test_banner_and_quorum():
    healthy, cut_off = picture(), picture(read_only=True)
    assert healthy.trouble() == "" and healthy.has_quorum()
    assert cut_off.trouble().startswith("READ-ONLY: n1 has no quorum")
    assert not cut_off.has_quorum()
    for m in cut_off.members.rows.values():  # nobody answers at all
        cut_off.members.put(m.name, m.__class__(**{**m.__dict__, "reachable": False}))
    assert cut_off.trouble().startswith("NO MEMBER REACHABLE")


def test_filters_commands_and_values():
    assert Filter.parse("Jobs").keeps("jobs/ingest-0") and not Filter.parse("!jobs").keeps(
        "jobs/x")
    assert Filter.parse("!jobs").keeps("shards/s-07")
    assert commands.parse(":pids") == ("view", "producers")
    assert commands.parse("q") == ("quit", "")
    assert commands.parse("bogus")[0] == "error"
    assert commands.parse(":users") == ("view", "users")
    assert commands.parse("role") == ("view", "roles")
    assert value_text(b'{"a":1}', "json") == '{\n  "a": 1\n}'
    assert value_text(b"\x00A", "hex").startswith("00000000  00 41")


def run_app(app: CoordApp, body) -> None:
    async def main() -> None:
        async with app.run_test(size=(120, 32)) as pilot:
            await body(pilot)
    asyncio.run(asyncio.wait_for(main(), 30))


def test_marks_one_range_all_and_none():
    app = CoordApp(picture(), start_view="owners")

    async def body(pilot) -> None:
        owners = app.views["owners"]
        owners.select(("jobs", "ingest-0"))
        await pilot.press("space")  # marks it, moves down to jobs/ingest-1
        await pilot.press("down", "ctrl+space")  # the range from the mark to shards/s-07
        assert {(o.group, o.resource) for o in owners.selected()} == {
            ("jobs", "ingest-0"), ("jobs", "ingest-1"), ("shards", "s-07")}
        request = owners.request("delete")
        assert isinstance(request, Action) and "jobs/ingest-0, jobs/ingest-1, shards/s-07" \
            in request.describe
        await pilot.press("u")
        assert len(owners.selected()) == 1  # none marked: the row under the cursor
        await pilot.press("slash")
        app.query_one("#prompt").value = "shards"
        await pilot.press("enter", "asterisk")
        assert {o.resource for o in owners.selected()} == {"s-07", "s-08"}

    run_app(app, body)


def test_compact_asks_only_when_there_is_history_to_forget():
    """An empty cluster is at revision 1 and its first write at 2 (as etcd's): compacting
    before 2 would forget nothing."""
    app = CoordApp(picture(), start_view="keys")

    async def body(pilot) -> None:
        keys = app.views["keys"]
        for revision in (1, 2):
            app.model.revision = revision
            assert keys.request("compact") == "nothing to compact yet"
        app.model.revision = 3
        request = keys.request("compact")
        assert isinstance(request, Action) and "before revision 3" in request.describe

    run_app(app, body)


def test_read_only_console_refuses_every_action():
    async def main() -> None:
        client = AsyncClient(["127.0.0.1:1"])  # never reached: nothing may be sent
        app = CoordApp(picture(), client=None, read_only=True, start_view="owners")
        app.client = client  # even with a client, the gate was made without a writer
        assert app.gate.read_only
        async with app.run_test(size=(120, 32)) as pilot:
            for view, key in (("owners", "ctrl+d"), ("owners", "f"), ("sessions", "ctrl+d"),
                              ("members", "t"), ("keys", "c")):
                app.show_view(view)
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(app.screen, ConfirmScreen)
                assert app.last_message.startswith("refused: read-only console")
        with pytest.raises(ActionRefused):
            await app.gate.run(Action("x", lambda w: asyncio.sleep(0)))
        await client.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_gate_refuses_without_quorum_and_runs_with_it():
    quorum = [False]
    ran: list[str] = []

    async def act(writer) -> str:
        ran.append("ran")
        return "done"

    gate = ActionGate(writer=object(), has_quorum=lambda: quorum[0])  # type: ignore[arg-type]
    with pytest.raises(ActionRefused, match="no quorum"):
        asyncio.run(gate.run(Action("x", act)))
    quorum[0] = True
    assert asyncio.run(gate.run(Action("x", act))) == "done" and ran == ["ran"]
