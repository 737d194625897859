"""The manual keeps its promises (tests/manual_rules.py): the README stays within its
line budget, no line of the README or of docs/ carries a commit hash, an issue number, a
load average or a dated run, and every `coord` command the pages show parses with the
CLI's own parser. Each rule is shown to catch a planted line."""

from __future__ import annotations

import pytest

from coord.cli.main import build_parser
from tests.manual_rules import (
    README_BUDGET,
    ROOT,
    RULES,
    coord_commands,
    manual_files,
    over_budget,
    violations,
)

PLANTED = {
    "commit hash": "measured at 94a4ce2 on main",
    "issue number": "the target of issue 31 (see #31)",
    "load average": "one run, load average 3.1 before",
    "dated run": "measured 2026-11-25 on this box",
}
"""A line each rule must catch."""

CLEAN = [
    "`--snapshot-every` | 20000 entries, `--quota-backend-bytes` 2 GiB",
    "`value_hash` | string | KV value: blake2b-64 hex",
    '.option("version", "20261125")    # required: a version publishes once',
    "## Read-only mode",
    "`date=YYYY-MM-DD/kind=...`, so Spark prunes by day",
    "the leader's loop at 64 clients; p99 20.83 ms; 0.88x etcd",
]
"""Lines of the manual's kind that no rule may take for a lab notebook's."""


def test_the_readme_is_within_its_line_budget() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) > 50  # the README was read: the check is live
    assert not over_budget(readme), f"README.md is {over_budget(readme)} lines over budget"


def test_a_planted_long_readme_is_over_budget() -> None:
    assert over_budget("line\n" * (README_BUDGET + 3)) == 3
    assert not over_budget("line\n" * README_BUDGET)


def test_no_lab_notebook_marks_in_the_readme_or_docs() -> None:
    files = list(manual_files())
    assert len(files) > 20  # the walk found the manual's pages: the check is live
    found = [str(v) for path in files
             for v in violations(str(path.relative_to(ROOT)), path.read_text())]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_catches_its_planted_line(rule: str) -> None:
    caught = {v.rule for v in violations("planted.md", PLANTED[rule])}
    assert rule in caught


@pytest.mark.parametrize("line", CLEAN)
def test_no_rule_takes_a_clean_line(line: str) -> None:
    assert not list(violations("clean.md", line))


def test_every_coord_command_in_the_docs_parses() -> None:
    pages = [p for p in manual_files() if p.suffix == ".md" and p.name != "README.md"]
    commands = [(page, line, argv) for page in pages
                for line, argv in coord_commands(page.read_text())]
    assert len(commands) > 30  # the pages' commands were found: the check is live
    bad = []
    for page, line, argv in commands:
        try:
            build_parser(argv[0]).parse_args(argv)
        except SystemExit:
            bad.append(f"{page.relative_to(ROOT)}:{line}: coord {' '.join(argv)}")
    assert not bad, "\n".join(bad)


def test_continued_and_chained_commands_are_each_checked() -> None:
    planted = "```sh\ncoord kv put a 1 && coord kv get a \\\n    --no-such-flag\n```\n"
    (_, first), (_, second) = coord_commands(planted)
    assert first == ["kv", "put", "a", "1"] and second == ["kv", "get", "a", "--no-such-flag"]
    build_parser("kv").parse_args(first)
    with pytest.raises(SystemExit):
        build_parser("kv").parse_args(second)
