"""Driving a console with textual's pilot: `coord tui` under the pilot instead of a
terminal, a `:` command typed, and waiting while the app keeps running."""

from __future__ import annotations

import time
from collections.abc import Callable

from coord.tui.app import CoordApp


async def until(pilot, predicate: Callable[[], bool], limit_s: float, what: str) -> float:
    """Seconds until `predicate` held (the app keeps running meanwhile)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > limit_s:
            raise AssertionError(f"{what}: not within {limit_s}s")
        await pilot.pause(0.02)
    return time.monotonic() - start


def drive(monkeypatch, check) -> list[CoordApp]:
    """`coord tui` runs `check(pilot, app)` under textual's pilot instead of a terminal;
    the apps it ran."""
    apps: list[CoordApp] = []

    async def run_async(app: CoordApp) -> None:
        apps.append(app)
        async with app.run_test(size=(140, 40)) as pilot:
            await check(pilot, app)

    monkeypatch.setattr(CoordApp, "run_async", run_async)
    return apps


async def command(pilot, app: CoordApp, line: str) -> None:
    """Type `:line` and enter."""
    await pilot.press("colon")
    app.query_one("#prompt").value = line
    await pilot.press("enter")
    await pilot.pause(0.05)


async def confirm(pilot, app: CoordApp, key: str) -> str:
    """Press an action's key, check the dialog names it, answer yes; the dialog text."""
    await pilot.press(key)
    await pilot.pause(0.1)
    question = str(app.screen.query_one("#question").render())
    await pilot.press("y")
    return question
