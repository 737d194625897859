"""MkDocs hook: the CLI reference page (`reference/cli.md`), generated at build time from
`coord.cli.main.build_parser`, so the manual lists exactly the commands and flags the
installed `coord` takes and cannot drift from them (a hand-written copy would)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterator

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "reference/cli.md"
WIDTH = 96
"""Help text is wrapped at this width whatever the terminal building the site says."""

INTRO = """# CLI reference

Every `coord` command with its flags, as `coord COMMAND --help` prints them. This page is
generated from the command line's own parser when the manual is built.

Client commands take `--endpoints` (else `$COORD_ENDPOINTS`, else the `coord dev`
ports), `--json`, the TLS flags `--cacert --cert --key` (else `$COORD_CACERT`,
`$COORD_CERT`, `$COORD_KEY`) and `--user NAME:PASSWORD` (else `$COORD_USER`,
`$COORD_PASSWORD`).
"""


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    """The parser's help at a fixed width, its own formatter class kept."""
    parser.formatter_class = functools.partial(parser.formatter_class, width=WIDTH)
    return parser.format_help().rstrip()


def _sections(parser: argparse.ArgumentParser, depth: int) -> Iterator[str]:
    for sub in _subcommands(parser).values():
        yield f"{'#' * depth} `{sub.prog}`\n\n```text\n{_help(sub)}\n```\n"
        yield from _sections(sub, min(depth + 1, 6))


def cli_reference() -> str:
    """The whole page: the top-level help, then each command and subcommand."""
    from coord.cli.main import build_parser

    parser = build_parser()
    return "\n".join([INTRO, f"```text\n{_help(parser)}\n```\n", *_sections(parser, 2)])


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=cli_reference()))
    return files
