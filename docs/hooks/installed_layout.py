"""MkDocs hook: the documented part of the `coord` package, laid out as it is installed,
for mkdocstrings to read.

mkdocstrings reads the source statically (griffe) and finds a package's modules by
walking its directory, but pyproject.toml's package-dir puts `coord.client` at the top
of the tree (client/), outside coord/. This hook mirrors the installed layout under
build/docs-src/coord with symbolic links, which the mkdocstrings handler's `paths`
names. The mirror is a regular package (an empty `__init__.py`), so griffe reads it
alone instead of merging every `coord` directory on the path into a namespace package,
and it holds only what the reference documents and what that imports: reading all of
coord would triple the build's time. Nothing is copied and nothing is imported."""

from __future__ import annotations

import shutil
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
MIRROR = ROOT / "build/docs-src/coord"
DOCUMENTED = {
    "client": ROOT / "client",  # coord.client, at the top of the tree
    "testing": ROOT / "coord/testing",
    "tls": ROOT / "coord/tls",  # the client's TLS type
    "wire.py": ROOT / "coord/wire.py",  # what client and server share about the wire
    "tagged_calls.py": ROOT / "coord/tagged_calls.py",  # the client's pipelined stream
}
"""Name under coord -> where it lives in the tree (pyproject.toml's package-dir)."""


def mirror_installed_layout() -> Path:
    """Make (afresh) the linked tree and return the directory holding `coord`."""
    shutil.rmtree(MIRROR, ignore_errors=True)
    MIRROR.mkdir(parents=True)
    (MIRROR / "__init__.py").write_text("")
    for name, target in DOCUMENTED.items():
        (MIRROR / name).symlink_to(target)
    return MIRROR.parent


@event_priority(100)
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Before mkdocstrings' own on_config: its Python handler keeps only the `paths`
    that exist when it starts (it expands them as globs), so on a fresh clone a mirror
    made after it would be ignored and no reference page would build."""
    mirror_installed_layout()
    return config
