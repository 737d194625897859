"""SVG snapshots (pytest-textual-snapshot) of each view at 120x32 over a fixed picture of
a cluster, and of the read-only banner. `pytest --snapshot-update` rewrites them after a
deliberate change to the look; the SVGs are the manual's console screenshots."""

from __future__ import annotations

import pytest

from coord.tui.app import CoordApp
from tests.tui.fixtures import picture, pulses

SIZE = (120, 32)


@pytest.mark.parametrize("view", ["members", "sessions", "owners", "producers", "keys",
                                  "events", "users", "roles"])
def test_view(snap_compare, view: str):
    assert snap_compare(CoordApp(picture(), start_view=view), terminal_size=SIZE)


def test_a_refused_view_says_which_permission(snap_compare):
    model = picture()
    model.refused("sessions", "user 'viewer' lacks READ on admin 'inspect'")
    assert snap_compare(CoordApp(model, start_view="sessions"), terminal_size=SIZE)


def test_pulses(snap_compare):
    model = picture()
    model.pulses = pulses()
    assert snap_compare(CoordApp(model, start_view="pulses"), terminal_size=SIZE)


def test_pulses_without_metrics_urls_says_how_to_get_them(snap_compare):
    assert snap_compare(CoordApp(picture(), start_view="pulses"), terminal_size=SIZE)


def test_read_only_banner(snap_compare):
    assert snap_compare(CoordApp(picture(read_only=True), read_only=True),
                        terminal_size=SIZE)


def test_keys_value_as_json_and_filter(snap_compare):
    async def open_app_json(pilot):
        app = pilot.app
        keys = app.views["keys"]
        folder = next(n for n in keys.tree.root.children if n.data == ("dir", "cfg/"))
        folder.expand()
        await pilot.pause()
        keys.tree.move_cursor(folder.children[-1])  # cfg/app.json after cfg/flags/
        await pilot.pause()

    assert snap_compare(CoordApp(picture(), start_view="keys"), terminal_size=SIZE,
                        run_before=open_app_json, press=["v"])


def test_owners_filtered_inverted(snap_compare):
    async def filt(pilot):
        await pilot.press("slash")
        pilot.app.query_one("#prompt").value = "!jobs"
        await pilot.press("enter")

    assert snap_compare(CoordApp(picture(), start_view="owners"), terminal_size=SIZE,
                        run_before=filt)


def test_help_lists_every_view(snap_compare):
    assert snap_compare(CoordApp(picture()), terminal_size=(120, 60), press=["question_mark"])
