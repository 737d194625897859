"""coord's version, read once from the installed package's metadata (pyproject.toml is
its one source): `coord --version`, the console's header and Admin status all say it."""

from __future__ import annotations

import importlib.metadata


def coord_version() -> str:
    """The installed coord's version, or "unknown" when run from a tree never installed."""
    try:
        return importlib.metadata.version("coord")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
