"""What the manual promises about itself, as checks over its text: the README stays a
newcomer's page, and neither it nor docs/ carries a lab notebook's marks (a commit hash,
an issue number, a load average, a dated run); history lives in git, not in the manual.
Also where the pages' samples are (fenced blocks, the `coord` commands in them), for the
tests that run or parse them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_BUDGET = 250
"""The README's line budget: what a newcomer reads before being sent into docs/."""

RULES: dict[str, re.Pattern[str]] = {
    # 7 to 40 lowercase hex digits with a digit and a letter among them, standing alone:
    # how prose names a commit; words and plain numbers never match.
    "commit hash": re.compile(
        r"(?<![\w/.#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/.-])"),
    "issue number": re.compile(r"\bissues?\s+#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE),
    "load average": re.compile(r"\bload\s+average|\bload\s+(?:of\s+)?~?\d|\buptime\b",
                               re.IGNORECASE),
    "dated run": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}
"""Name -> what a line carrying it looks like."""


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.text.strip()}"


def violations(path: str, text: str) -> Iterator[Violation]:
    """Every line of `text` that breaks a rule, once per rule."""
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in RULES.items():
            if pattern.search(line):
                yield Violation(path, number, rule, line)


def manual_files(root: Path = ROOT) -> Iterable[Path]:
    """The README and every page and data file of the manual (docs/, hooks included),
    but the benchmarks' own `--json` outputs (docs/manual/benchmarks/): a run's record
    (its date, commit and load) is what such a file is for, and the page shows only the
    command, date, machine and commit from it."""
    yield root / "README.md"
    outputs = root / "docs" / "manual" / "benchmarks"
    for path in sorted((root / "docs").rglob("*")):
        if (path.is_file() and path.suffix in {".md", ".yml", ".py", ".json", ".csv"}
                and not (path.suffix == ".json" and path.parent == outputs)):
            yield path


def over_budget(readme: str) -> int:
    """How many lines the README has beyond its budget (0: within it)."""
    return max(0, len(readme.splitlines()) - README_BUDGET)


FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(text: str, info: str) -> list[tuple[int, str]]:
    """(line, body) of each fenced block whose info string is exactly `info`."""
    return [(text.count("\n", 0, m.start()) + 2, m.group("body"))
            for m in FENCE.finditer(text) if m.group("info").strip() == info]


def coord_commands(text: str) -> list[tuple[int, list[str]]]:
    """(line, argv after `coord`) of each `coord ...` command in the ```sh blocks:
    comments dropped, continued lines joined, and commands chained with && or written
    side by side (two spaces or more apart) taken one by one."""
    out = []
    for first, body in blocks(text, "sh"):
        rows = body.splitlines()
        number = 0
        while number < len(rows):
            line, row = first + number, rows[number].split(" #", 1)[0].rstrip()
            while row.endswith("\\") and number + 1 < len(rows):
                number += 1
                row = row[:-1] + " " + rows[number].split(" #", 1)[0].strip()
            number += 1
            for command in re.split(r"\s*&&\s*|\s{2,}(?=coord )", row.strip()):
                if command.startswith("coord "):
                    out.append((line, _without_elisions(shlex.split(command)[1:])))
    return out


def _without_elisions(argv: list[str]) -> list[str]:
    """`coord serve ... --cert-file F`: a "..." that is no flag's value stands for flags
    shown before, and is dropped; `--endpoints ...` keeps it as the flag's value."""
    return [a for i, a in enumerate(argv)
            if a != "..." or (i > 0 and argv[i - 1].startswith("-"))]
