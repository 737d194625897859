"""MkDocs hook: each `<!-- bench-table: PATH -->` marker in a page becomes the table of the
`coord bench ... --json` output at PATH (relative to the page), rendered by the
benchmark's own table code (`coord.bench.tables`) with its footer: the command, date,
machine and commit of the run. The manual's figures are thus the data
files the benchmarks wrote, never figures copied by hand. A marker naming a missing or
malformed file fails the build: a page must not silently lose its table."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

MARKER = re.compile(r"<!--\s*bench-table:\s*(\S+)\s*-->")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig,
                     files: Files) -> str:
    from coord.bench.tables import markdown_page_table

    here = Path(config["docs_dir"]) / Path(page.file.src_uri).parent

    def table(marker: re.Match[str]) -> str:
        path = here / marker.group(1)
        try:
            return markdown_page_table(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise PluginError(f"{page.file.src_uri}: bench-table {marker.group(1)}: {e}") from e

    return MARKER.sub(table, markdown)
