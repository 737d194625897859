"""Progress bars for long commands (history export and import, a bulk `coord own`, the
benchmarks' long phases): rich, on stderr, so stdout carries only the command's output.

The history commands show theirs whenever stderr is a terminal (their stdout is a JSON
summary). A bulk own and the benchmarks show theirs only to a person at a terminal
(`on_terminal`): not with --json, not when stdout is piped or redirected.

A module of its own, beside the layers: the command line and the benchmarks both draw
bars, and the benchmarks may not import the command line (tests/test_layout.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any


def progress_bar(shown: bool | None = None) -> Any:
    """A rich Progress with a `rate` field, entries (M of N), elapsed and remaining time;
    drawn when `shown` (None: when stderr is a terminal)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if shown is None:
        shown = sys.stderr.isatty()
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), transient=False, disable=not shown,
                    console=Console(stderr=True))


def on_terminal(args: Any) -> bool:
    """A person is watching: no --json, and both stdout and stderr are terminals."""
    return (not getattr(args, "json", False) and sys.stdout.isatty()
            and sys.stderr.isatty())


Step = Callable[..., None]  # step(n=1): n more done


class Phases:
    """One bar per phase of a long command. Off (not `shown`), the same calls do nothing
    visible, so the code that runs the phases is the same either way."""

    TICK_S = 0.25

    def __init__(self, shown: bool = False) -> None:
        self.progress = progress_bar(shown)

    def __enter__(self) -> Phases:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    @contextlib.contextmanager
    def phase(self, name: str, total: int | None = None, unit: str = "") -> Iterator[Step]:
        """A bar of `total` steps (None: no known end); the block calls `step(n)`, and the
        rate is shown in `unit`s a second."""
        progress, started = self.progress, time.monotonic()
        task = progress.add_task(name, total=total, rate="")
        done = [0]

        def step(n: int = 1) -> None:
            done[0] += n
            rate = done[0] / max(time.monotonic() - started, 1e-9)
            progress.update(task, completed=done[0],
                            rate=f"{rate:,.0f} {unit}/s" if unit else "")
        try:
            yield step
        finally:
            progress.update(task, total=total if total is not None else done[0],
                            completed=total if total is not None else done[0])

    @contextlib.asynccontextmanager
    async def timed(self, name: str, seconds: float) -> AsyncIterator[None]:
        """A bar that fills with the time a phase of `seconds` has run (a closed-loop
        load, a soak)."""
        progress, started = self.progress, time.monotonic()
        task = progress.add_task(name, total=max(1, round(seconds)), rate="")

        async def tick() -> None:
            while True:
                progress.update(task, completed=min(seconds, time.monotonic() - started))
                await asyncio.sleep(self.TICK_S)
        ticker = asyncio.get_running_loop().create_task(tick())
        try:
            yield
        finally:
            ticker.cancel()
            progress.update(task, completed=max(1, round(seconds)))
