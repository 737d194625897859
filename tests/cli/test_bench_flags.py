"""`coord bench TARGET`: each target's parser gives its benchmark every flag it reads
(a missing one would fail only at the end of a long run) and no flag it does not read
(`coord bench readonly --help` lists readonly's own). The reads are found in the
benchmark module's source: `args.NAME`, and `on_terminal(args)` for --json."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coord.cli.bench import TARGETS
from coord.cli.main import build_parser

BENCH = Path(__file__).resolve().parents[2] / "coord" / "bench"
MODULE = {"own": "api", "pid": "api", "kv": "api", "spark": "spark_writer",
          "snapshot": "snapshot_transfer"}
"""The targets whose module is not named as they are (cmd_bench's imports)."""
NOT_FLAGS = {"command", "target", "func", "run"}
"""What the parser (and cmd_bench: the `run` record) set besides the flags."""


def reads(source: str) -> set[str]:
    """The `args` attributes a benchmark module reads."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "args":
            out.add(node.attr)
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "on_terminal"
              and [getattr(a, "id", "") for a in node.args] == ["args"]):
            out.add("json")
    return out - NOT_FLAGS


def flags(target: str) -> set[str]:
    return set(vars(build_parser("bench").parse_args(["bench", target]))) - NOT_FLAGS


def check(target: str, read_by: dict[str, set[str]]) -> list[str]:
    """What is wrong with `target`'s flags: a flag its module never reads, or a read that
    no target run by that module provides (own, pid and kv share coord/bench/api.py)."""
    module = MODULE.get(target, target)
    given = set().union(*(flags(t) for t in TARGETS if MODULE.get(t, t) == module))
    return ([f"--{f.replace('_', '-')} is not read" for f in flags(target) - read_by[module]]
            + [f"args.{a} is read but no flag gives it" for a in read_by[module] - given])


def read_by_module() -> dict[str, set[str]]:
    return {MODULE.get(t, t): reads((BENCH / f"{MODULE.get(t, t)}.py").read_text())
            for t in TARGETS}


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_has_exactly_the_flags_its_benchmark_reads(target):
    assert check(target, read_by_module()) == []


def test_the_check_catches_a_missing_and_an_unread_flag():
    planted = read_by_module()
    planted["readonly"] = planted["readonly"] - {"zk_tick_ms"} | {"rows"}
    assert check("readonly", planted) == ["--zk-tick-ms is not read",
                                          "args.rows is read but no flag gives it"]


def test_a_targets_help_lists_only_its_own_flags(capsys):
    with pytest.raises(SystemExit):
        build_parser("bench").parse_args(["bench", "readonly", "--help"])
    out = capsys.readouterr().out
    assert "--zk-tick-ms" in out and "--rows" not in out
