"""MkDocs hook: the console page's screenshots are the TUI's own SVG snapshot tests'
files (tests/tui/__snapshots__), published under `using/console/` at build time, so the
pictures are the ones the tests check and never a stale copy kept in docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SNAPSHOTS = Path(__file__).resolve().parents[2] / "tests/tui/__snapshots__/test_snapshots"
SHOTS = {
    "members.svg": "test_view[members].svg",
    "sessions.svg": "test_view[sessions].svg",
    "owners.svg": "test_view[owners].svg",
    "producers.svg": "test_view[producers].svg",
    "keys.svg": "test_keys_value_as_json_and_filter.svg",
    "events.svg": "test_view[events].svg",
    "read-only-banner.svg": "test_read_only_banner.svg",
    "pulses.svg": "test_pulses.svg",
}
"""Published name -> snapshot file."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for name, snapshot in SHOTS.items():
        files.append(File.generated(config, f"using/console/{name}",
                                    abs_src_path=str(SNAPSHOTS / snapshot)))
    return files
