"""What the file sinks need to survive a crash: fsync a file, or files and every
directory naming them up to a root (a rename is durable only once the directory
holding the new name is synced)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path) -> None:
    """fsync a file's data, or a directory's entries."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_paths(paths: list[Path], root: Path, files: bool = True) -> None:
    """fsync `paths` (unless `files` is False) and every directory from theirs up to
    `root`, each directory once: a file's data and the entries naming it, as far as
    `root`, survive a crash once this returns."""
    dirs: list[Path] = []
    for path in paths:
        if files:
            fsync_path(path)
        for d in path.parents:
            if d not in dirs:
                dirs.append(d)
            if d == root:
                break
    for d in dirs:
        fsync_path(d)
