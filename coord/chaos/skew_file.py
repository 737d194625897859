"""The file through which the skew nemesis sets a skewed member's wall clock
(coord.chaos.skewed_member --skew-file follows it): the skew in ms, as text. Its own
module so the nemesis writes it without importing the member's entry point."""

from __future__ import annotations

import os
from pathlib import Path


def write_skew(path: Path, skew_ms: int) -> None:
    """Set the skew of the member reading `path` (whole: a reader never sees half)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{skew_ms}\n")
    os.replace(tmp, path)


def read_skew(path: Path) -> int:
    """The skew `path` holds; 0 while there is none."""
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return 0
