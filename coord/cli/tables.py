"""The CLI's human output as rich tables (`--json` output is never a table). On a
terminal they are coloured and fit its width; piped, plain text at a fixed width, so
`coord status | grep` still works."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

PIPED_WIDTH = 200


def console() -> Console:
    """stdout as rich sees it (a fresh one each call, so tests' capture works)."""
    if sys.stdout.isatty():
        return Console()
    return Console(width=PIPED_WIDTH, no_color=True, highlight=False, soft_wrap=False)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                title: str | None = None, caption: str | None = None) -> None:
    table = Table(*headers, title=title, caption=caption, box=None, header_style="bold",
                  pad_edge=False, title_justify="left", caption_justify="left")
    for row in rows:
        table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in row))
    console().print(table)


def is_terminal() -> bool:
    return sys.stdout.isatty()
