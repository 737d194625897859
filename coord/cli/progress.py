"""The history commands' progress bar: rich, on stderr (stdout carries the JSON summary),
shown only on a terminal; the console under it prints the commands' messages either way."""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(what: str) -> Any:
    """A rich Progress with a `rate` field, entries (M of N), elapsed and remaining time."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), transient=False, disable=not sys.stderr.isatty(),
                    console=Console(stderr=True))
