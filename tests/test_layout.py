"""The layering, enforced: coord's import graph has no cycles, each layer imports only
what its contract allows, `import coord.client` stays light, the CLI's start-up loads
only what the command needs, and pyproject.toml installs every package.

The graph is read from the source with `ast`, never by importing it, and counts every
import statement wherever it is (module level, inside functions, under `if
TYPE_CHECKING:`) plus `importlib.import_module("literal")` / `__import__("literal")`:

- imports inside functions count like module-level ones, for cycles and contracts alike:
  a lazy import still runs the moment its function does, so it must not close a cycle
  (laziness is for start-up time, never for dodging one) nor cross a layer;
- `TYPE_CHECKING` imports count for the contracts (a layer must not even name a
  forbidden layer's types) but not for cycles: they never execute, so they cannot make
  one module's import wait on another's (two modules may annotate with each other's
  types).

Every checker is also run on a planted violation it must catch.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"coord": "coord", "coord.server": "server", "coord.client": "client"}
"""Import name -> directory (pyproject.toml's package-dir; a test checks they agree)."""

TOP, FUNCTION, TYPE_CHECKING = "module level", "inside a function", "under TYPE_CHECKING"

ALLOWED_LAYERS = (
    "coord.__main__", "coord.raft", "coord.rafttest", "coord.sm", "coord.server", "coord.client",
    "coord.cli", "coord.testing", "coord.bench", "coord.v1", "coord.etcdpb", "coord.history",
    "coord.audit", "coord.serve_flags", "coord.tls",
)
"""The packages (and modules) directly under coord/ that exist by design. Anything else
under coord/ is a new surface (a TUI, a pipeline, a chaos tool...) and gets
NEW_SURFACE_FORBIDDEN: only coord.cli and coord.testing may import the member; the tools
(coord.bench, coord.chaos) start members through coord.testing's processes and talk to
them through the client, as an operator would."""

NEW_SURFACE_FORBIDDEN = ("coord.server",)

CONTRACTS: dict[str, tuple[str, ...]] = {
    # The client library: what applications import; no server, no consensus, no sqlite.
    "coord.client": ("coord.server", "coord.raft", "coord.sm", "coord.cli", "coord.testing",
                     "coord.bench", "sqlite3"),
    # The Raft core: pure and deterministic; nothing of ours, no I/O, no event loop.
    "coord.raft": ("coord", "grpc", "sqlite3", "asyncio"),
    # Its simulator: the core's RawNode API only, as deterministic as the core.
    "coord.rafttest": ("coord.server", "coord.sm", "coord.client", "coord.cli",
                       "coord.testing", "coord.bench", "coord.history", "coord.audit",
                       "coord.v1", "coord.etcdpb", "grpc", "sqlite3", "asyncio"),
    # The state machine: pure; the server drives it, never the other way round.
    "coord.sm": ("coord.server", "coord.raft", "coord.client", "grpc", "sqlite3"),
    # The member: never the tools that start it, nor the client library, nor a command
    # line: it is given a MemberConfig.
    "coord.server": ("coord.cli", "coord.testing", "coord.bench", "coord.client",
                     "coord.serve_flags", "argparse"),
    # `coord serve`'s flags, shared by every program that runs a member: above the member,
    # below the tools that start one (all of them import it).
    "coord.serve_flags": ("coord.cli", "coord.testing", "coord.bench", "coord.client"),
    # The tools that start members: testing is what cli and bench build on, bench is what
    # cli runs; never the other way round (that was the cli -> testing -> cli cycle). The
    # benchmarks start members through testing and drive them through the client: never
    # the member's insides.
    "coord.testing": ("coord.cli", "coord.bench"),
    "coord.bench": ("coord.cli", "coord.server"),
    # The history export: client-side; it replays entries through the pure state machine
    # and reads a member's files, never the server (but for its log reader, below) nor
    # Spark (exporting needs no JVM).
    "coord.history": ("coord.server", "coord.cli", "coord.testing", "coord.bench",
                      "coord.audit", "pyspark"),
    # The audit reads exported files only: no server, client, consensus or state machine.
    "coord.audit": ("coord.server", "coord.client", "coord.raft", "coord.sm", "coord.cli",
                    "coord.testing", "coord.bench"),
    # TLS files, credentials and certificates: below everything that opens a connection.
    "coord.tls": ("coord.server", "coord.client", "coord.cli", "coord.testing", "coord.bench"),
    # Generated code's packages depend on nothing of ours.
    "coord.v1": ("coord",),
    "coord.etcdpb": ("coord",),
}
"""Layer -> what it must not import (a name, or a dotted prefix of names). A layer may
always import itself: `coord.raft` forbidding `coord` means every *other* coord layer."""

CONTRACT_EXCEPTIONS: dict[str, tuple[str, ...]] = {
    # The log file's format has one owner, the member's storage: the history export reads
    # a member's log through its read-only reader rather than repeat the SQL.
    # A member's snapshot is a file the log names (`coord.server.snapshot_file`): the
    # export restores from it as the member does.
    "coord.history": ("coord.server.storage.log_reader", "coord.server.storage.log_format",
                      "coord.server.snapshot_file"),
}
"""Layer -> the modules it may import although its contract forbids them: whole module
names, never prefixes, so the exception cannot grow by a new module beside them."""


# -- reading the graph ------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported: a project module or an external dotted name
    line: int
    kind: str  # TOP, FUNCTION or TYPE_CHECKING


def is_generated(path: Path) -> bool:
    return "_pb2" in path.stem


def discover(root: Path, sources: dict[str, str] = SOURCES) -> dict[str, Path]:
    """Every project module (dotted name -> file) under `root`, generated code left out."""
    modules: dict[str, Path] = {}
    for name, directory in sources.items():
        base = root / directory
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts or is_generated(path):
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([name, *parts])] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _dynamic_import(node: ast.Call) -> str | None:
    """The literal module name of `importlib.import_module("x")` / `__import__("x")`."""
    f = node.func
    named = (isinstance(f, ast.Name) and f.id in ("__import__", "import_module")) or (
        isinstance(f, ast.Attribute) and f.attr == "import_module")
    if named and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def _imports_in(tree: ast.AST) -> Iterator[tuple[str, int, str, str | None]]:
    """(module, line, kind, imported name or None) for every import in a module's tree;
    relative module names keep their leading dots."""
    stack: list[tuple[ast.AST, str]] = [(tree, TOP)]
    while stack:  # bounded: each node of the tree is pushed once
        node, kind = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, kind, None
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                yield module, node.lineno, kind, alias.name
        elif isinstance(node, ast.Call) and (name := _dynamic_import(node)) is not None:
            yield name, node.lineno, kind, None
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack += [(n, TYPE_CHECKING) for n in node.body]
            stack += [(n, kind) for n in node.orelse]
            continue
        inner = FUNCTION if kind == TOP and isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else kind
        stack += [(n, inner) for n in ast.iter_child_nodes(node)]


def _absolute(module: str, source: str, is_package: bool) -> str:
    """`from .x import y` in `source`, made absolute."""
    level = len(module) - len(module.lstrip("."))
    if not level:
        return module
    base = source.split(".")
    base = base[: len(base) - level + (1 if is_package else 0)]
    rest = module[level:]
    return ".".join(base + ([rest] if rest else []))


def resolve(module: str, name: str | None, modules: Iterable[str]) -> str:
    """The module an import lands on: `from pkg import sub` is `pkg.sub` when that is a
    module (or generated code), `from mod import name` is `mod`; an external name stays
    as written. Generated modules are leaves: never parsed, still named (for contracts)."""
    known = set(modules)
    if name is not None and name != "*":
        candidate = f"{module}.{name}"
        if candidate in known or (layer(module) is not None and "_pb2" in name):
            return candidate
    if module in known or "_pb2" in module.rsplit(".", 1)[-1]:
        return module
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):  # `import coord.sm.kv.thing`: the module part
        if ".".join(parts[:i]) in known:
            return ".".join(parts[:i])
    return module


def read_imports(modules: dict[str, Path]) -> list[Import]:
    """Every import of every module, one record per (source, target, line, kind)."""
    out: set[Import] = set()
    for source, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        for module, line, kind, name in _imports_in(tree):
            target = resolve(_absolute(module, source, is_package), name, modules)
            out.add(Import(source, target, line, kind))
    return sorted(out, key=lambda i: (i.source, i.line, i.target))


def graph(modules: Iterable[str], imports: Iterable[Import],
          kinds: tuple[str, ...] = (TOP, FUNCTION)) -> dict[str, set[str]]:
    """Project module -> the project modules it imports through imports of `kinds`
    (generated modules are leaves, left out: they import nothing of ours)."""
    g: dict[str, set[str]] = {m: set() for m in modules}
    for i in imports:
        if i.kind in kinds and i.target in g:
            g[i.source].add(i.target)
    return g


# -- checking it --------------------------------------------------------------------------


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a, as [a, b, ..., a]) per strongly connected component
    that has one (Tarjan's algorithm, iterative; each node and edge is visited once)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(g.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    scc.append(member)
                    if member == node:
                        break
                if len(scc) > 1 or node in g.get(node, ()):
                    found.append(_cycle_through(node, set(scc), g))
    return found


def _cycle_through(start: str, scc: set[str], g: dict[str, set[str]]) -> list[str]:
    """A shortest path start -> ... -> start inside one strongly connected component."""
    parent: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:  # breadth first: bounded by the component's size
        step = []
        for node in frontier:
            for nxt in sorted(g[node] & scc):
                if nxt == start:
                    path = [node]
                    while (up := parent[path[-1]]) is not None:
                        path.append(up)
                    return [*reversed(path), start]
                if nxt not in parent:
                    parent[nxt] = node
                    step.append(nxt)
        frontier = step
    raise AssertionError(f"{start} is in a component without a cycle through it")


def layer(module: str) -> str | None:
    """coord.server.node.driver -> coord.server; None for what is not ours."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "coord" and len(parts) > 1 else None


def _matches(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


@dataclass(frozen=True)
class Violation:
    imp: Import
    layer: str  # the importing module's layer
    rule: str  # the forbidden name or prefix it matched
    new_surface: bool  # the layer is not in ALLOWED_LAYERS

    def __str__(self) -> str:
        i = self.imp
        who = self.layer + (" (a new surface: not in ALLOWED_LAYERS)" if self.new_surface else "")
        return f"{i.source}:{i.line} imports {i.target} ({i.kind}): {who} must not import" \
            f" {self.rule}"


def violations(imports: Iterable[Import], contracts: dict[str, tuple[str, ...]] = CONTRACTS,
               allowed: tuple[str, ...] = ALLOWED_LAYERS,
               exceptions: dict[str, tuple[str, ...]] = CONTRACT_EXCEPTIONS) -> list[Violation]:
    """Every import that breaks its layer's contract (and is not one of its exceptions)."""
    out = []
    for i in imports:
        own = layer(i.source)
        if own is None or layer(i.target) == own or i.target in exceptions.get(own, ()):
            continue
        forbidden = contracts.get(own, ()) if own in allowed else NEW_SURFACE_FORBIDDEN
        hit = next((f for f in forbidden if _matches(i.target, f)), None)
        if hit is not None:
            out.append(Violation(i, own, hit, own not in allowed))
    return out


def package_mismatch(root: Path, sources: dict[str, str], listed: Iterable[str]
                     ) -> tuple[set[str], set[str]]:
    """(packages on disk that `listed` leaves out, listed names that are not packages).
    A package is a directory with an __init__.py, or one of the `sources` roots (coord/
    has none: it is the namespace server/ and client/ are mapped into)."""
    on_disk = set(sources)
    for name, directory in sources.items():
        for init in (root / directory).rglob("__init__.py"):
            rel = init.parent.relative_to(root / directory).parts
            on_disk.add(".".join([name, *rel]))
    listed = set(listed)
    return on_disk - listed, listed - on_disk


def loaded_by(statement: str, after: str = "") -> set[str]:
    """The modules a fresh interpreter loads running `statement`, after `after` (whose
    own modules are left out)."""
    code = (f"import json, sys\n{after}\nbefore = set(sys.modules)\n{statement}\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def heavy(modules: Iterable[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(_matches(m, f) for f in forbidden))


# -- the project's own tree --------------------------------------------------------------

MODULES = discover(ROOT)
IMPORTS = read_imports(MODULES)


def test_the_walk_sees_the_project():
    """A guard for the guards: the modules and the kinds of import they are known to
    have are all found (a walk that saw nothing would pass everything below)."""
    assert {"coord.cli.main", "coord.server.member", "coord.client.sync", "coord.raft.raft",
            "coord.sm", "coord.__main__"} <= set(MODULES)
    assert not any("_pb2" in m for m in MODULES)
    kinds = {(i.source, i.target, i.kind) for i in IMPORTS}
    assert ("coord.cli.bench", "coord.bench.raft", FUNCTION) in kinds
    assert ("coord.testing.local_cluster", "coord.testing.embedded", TYPE_CHECKING) in kinds
    assert ("coord.server.member", "coord.server.config", TOP) in kinds
    assert ("coord.server.member", "coord.v1.admin_pb2", TOP) in kinds


def test_no_import_cycles():
    found = cycles(graph(MODULES, IMPORTS))
    assert not found, "import cycles (function-level imports included):\n" + "\n".join(
        " -> ".join(c) for c in found)


@pytest.mark.parametrize("own", [*CONTRACTS, "new surfaces"])
def test_every_layer_keeps_its_contract(own: str):
    """One layer's imports at a time (`new surfaces`: every layer not in ALLOWED_LAYERS),
    so one layer's known debt does not hide another's."""
    broken = [str(v) for v in violations(IMPORTS)
              if (v.new_surface if own == "new surfaces" else v.layer == own)]
    assert not broken, "\n".join(broken)


def test_the_allow_list_names_what_exists():
    layers = {layer(m) for m in MODULES}
    assert set(ALLOWED_LAYERS) <= layers, set(ALLOWED_LAYERS) - layers
    assert set(CONTRACTS) <= set(ALLOWED_LAYERS)


def test_importing_the_client_loads_no_server_raft_sqlite_or_certificate_maker():
    loaded = loaded_by("import coord.client")
    assert "coord.client.sync" in loaded  # the check below is live
    bad = heavy(loaded, ("coord.server", "coord.raft", "sqlite3", "cryptography",
                         "coord.tls.certs"))
    assert not bad, bad


def test_the_pytest_plugin_loads_no_cluster_code_until_a_test_asks():
    """pytest imports the plugin at every start of every project that has coord
    installed: it must not bring grpc, the client or the server with it."""
    loaded = loaded_by("import coord.testing.pytest_plugin")
    assert "coord.testing.pytest_plugin" in loaded  # the check below is live
    bad = heavy(loaded, ("grpc", "coord.client", "coord.server", "coord.testing.local_cluster"))
    assert not bad, bad


def test_pyproject_lists_exactly_the_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == SOURCES
    missing, extra = package_mismatch(ROOT, SOURCES, config["packages"])
    assert (missing, extra) == (set(), set())


def test_every_source_directory_is_a_package():
    """A directory of modules without __init__.py would not be installed (the explicit
    `packages` list would not name it): only coord/ itself, the namespace, has none."""
    for directory in SOURCES.values():
        for path in (ROOT / directory).rglob("*.py"):
            d = path.parent
            if "__pycache__" in d.parts or d == ROOT / "coord":
                continue
            assert (d / "__init__.py").exists(), f"{d} has modules but no __init__.py"



def folders_of_tests(root: Path) -> list[Path]:
    """Every folder of tests under `root`/tests (one holding a test_*.py file)."""
    tests = root / "tests"
    return sorted({p.parent for p in tests.rglob("test_*.py")} - {tests})


def unmirrored(root: Path, modules: Iterable[str]) -> list[str]:
    """Test folders that name no package of the code: tests/server/X is coord.server.X,
    tests/client/X is coord.client.X, tests/X is coord.X (as SOURCES maps them)."""
    known = set(modules)
    out = []
    for folder in folders_of_tests(root):
        parts = folder.relative_to(root / "tests").parts
        name = ".".join(["coord", *parts])  # tests/server/api -> coord.server.api
        if name not in known:
            out.append(f"{folder.relative_to(root)} mirrors no package ({name})")
    return out


def test_the_tests_mirror_the_code():
    """A test lives in the folder of the package it tests, so the tree of tests/ is the
    tree of the code (data folders such as snapshots hold no test_*.py)."""
    assert len(folders_of_tests(ROOT)) > 20  # the walk saw the tests: the check is live
    assert not (bad := unmirrored(ROOT, MODULES)), bad

# -- the command line's start-up ---------------------------------------------------------


def test_the_serve_parser_loads_no_client_commands():
    """`coord serve` start-up is what test rigs wait on. `coord.cli.client_commands` is a
    package, one module per family: the prefix covers every one of them."""
    loaded = loaded_by("from coord.cli.main import build_parser; build_parser('serve')")
    assert "coord.serve_flags" in loaded  # the serve flags: the check below is live
    assert not (bad := heavy(loaded, ("coord.cli.client_commands", "coord.client"))), bad


def test_client_commands_load_nothing_of_the_server_beyond_the_client_library():
    """coord.client is light (above), and so are the client commands."""
    loaded = loaded_by(
        "from coord.cli.main import main\n"
        "main(['kv', 'get', 'k', '--endpoints', '127.0.0.1:1', '--timeout', '0.2'])",
        after="import coord.client")
    assert "coord.cli.client_commands.kv" in loaded  # it ran: the check below is live
    bad = heavy(loaded, ("coord.server", "coord.raft", "coord.sm", "coord.testing",
                         "coord.bench", "sqlite3"))
    assert not bad, bad


def _choices(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_each_commands_own_parser_is_the_whole_parsers_part():
    from coord.cli import client_commands
    from coord.cli.main import CLIENT_COMMANDS, PIPELINE_COMMANDS, SERVER_COMMANDS, build_parser

    alone = argparse.ArgumentParser()
    client_commands.register(alone.add_subparsers())
    assert _choices(alone) == set(CLIENT_COMMANDS)
    whole = build_parser()
    assert _choices(whole) == {*SERVER_COMMANDS, *CLIENT_COMMANDS, *PIPELINE_COMMANDS}
    samples = {"serve": ["--name", "n1"], "dev": [], "status": ["--endpoints", "x:1"],
               "bench": ["raft"], "tui": ["--endpoints", "x:1"],
               "own": ["g", "r"], "release": ["g", "r", "--session", "1"],
               "owners": ["g"], "watch-owners": ["g"], "pid": ["block"],
               "kv": ["get", "k"], "session": ["open"], "defrag": ["--endpoints", "x:1"],
               "auth": ["enable"], "user": ["add", "u:p"],
               "role": ["grant-permission", "r", "read", "k", "--kind", "group"],
               "snapshot": ["status", "f"], "certs": ["issue", "n1", "--dir", "d"],
               "chaos": ["--seconds", "5"],
               "history": ["synth", "--commands", "1", "--out", "h"], "audit": ["h"]}
    for command in (*SERVER_COMMANDS, *CLIENT_COMMANDS, *PIPELINE_COMMANDS):
        argv = [command, *samples[command]]
        assert vars(build_parser(command).parse_args(argv)) == vars(whole.parse_args(argv))
    assert _choices(build_parser("no-such-command")) == _choices(whole)  # its error lists all


# -- planted violations: each checker must catch one ----------------------------------------


def _plant(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return discover(root)


PLANTED = {
    "coord/raft/__init__.py": "",
    "coord/raft/core.py": "def step():\n    import asyncio\n    from coord.sm import kv\n",
    "coord/sm/__init__.py": "",
    "coord/sm/kv.py": "from coord.raft.core import step\n",
    "client/__init__.py": "",
    "client/sync.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from coord.server.node import driver\n"),
    "server/__init__.py": "",
    "server/node.py": "import grpc\n",
    "coord/tui/__init__.py": "",
    "coord/tui/app.py": ("import importlib\n\ndef main():\n"
                         "    return importlib.import_module('coord.server.node')\n"),
    "coord/v1/__init__.py": "",
    "coord/v1/admin_pb2.py": "import coord.sm\n",  # generated: never parsed
}


def test_the_cycle_finder_catches_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert sorted(cycles(g)) == [["a", "b", "c", "a"], ["e", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []


def test_the_graph_reader_catches_a_cycle_closed_by_a_function_level_import(tmp_path):
    modules = _plant(tmp_path, PLANTED)
    imports = read_imports(modules)
    assert "coord.v1.admin_pb2" not in modules  # generated: its planted import is not read
    assert cycles(graph(modules, imports)) == [
        ["coord.raft.core", "coord.sm.kv", "coord.raft.core"]]
    # TYPE_CHECKING imports are outside the cycle check but not outside the graph:
    assert graph(modules, imports, (TYPE_CHECKING,))["coord.client.sync"] == {
        "coord.server.node"}


def test_the_contract_checker_catches_planted_forbidden_imports(tmp_path):
    broken = [str(v) for v in violations(read_imports(_plant(tmp_path, PLANTED)))]
    assert broken == [
        "coord.client.sync:3 imports coord.server.node (under TYPE_CHECKING):"
        " coord.client must not import coord.server",
        "coord.raft.core:2 imports asyncio (inside a function): coord.raft must not import"
        " asyncio",
        "coord.raft.core:3 imports coord.sm.kv (inside a function): coord.raft must not"
        " import coord",
        "coord.sm.kv:1 imports coord.raft.core (module level): coord.sm must not import"
        " coord.raft",
        "coord.tui.app:4 imports coord.server.node (inside a function): coord.tui (a new"
        " surface: not in ALLOWED_LAYERS) must not import coord.server",
    ]


def test_a_contract_exception_lets_through_its_modules_and_nothing_beside_them(tmp_path):
    planted = {
        "coord/history/__init__.py": "",
        "coord/history/export.py": (
            "from coord.server.storage import log_reader\n"
            "from coord.server.storage.log_format import db_path\n"
            "from coord.server.storage.log_store import LogStore\n"
            "import coord.server.storage\n"),
        "coord/audit/__init__.py": "",
        "coord/audit/job.py": "from coord.server.storage.log_reader import LogReader\n",
        **{f"server/{m}.py": "" for m in ("__init__", "storage/__init__", "storage/log_reader",
                                          "storage/log_format", "storage/log_store")},
    }
    broken = [(v.imp.source, v.imp.line, v.imp.target)
              for v in violations(read_imports(_plant(tmp_path, planted)))]
    assert broken == [("coord.audit.job", 1, "coord.server.storage.log_reader"),
                      ("coord.history.export", 3, "coord.server.storage.log_store"),
                      ("coord.history.export", 4, "coord.server.storage")]


def test_the_excepted_modules_load_nothing_else_of_the_server():
    """An exception is as narrow as what its modules import in turn."""
    for module in CONTRACT_EXCEPTIONS["coord.history"]:
        loaded = heavy(loaded_by(f"import {module}"), ("coord.server",))
        assert module in loaded  # the check below is live
        assert set(loaded) <= {"coord.server", "coord.server.storage",
                               *CONTRACT_EXCEPTIONS["coord.history"]}, loaded


def test_the_package_checker_catches_a_missing_and_a_stray_package(tmp_path):
    _plant(tmp_path, PLANTED)
    missing, extra = package_mismatch(
        tmp_path, SOURCES, ["coord", "coord.raft", "coord.sm", "coord.v1", "coord.server",
                            "coord.client", "coord.gone"])
    assert (missing, extra) == ({"coord.tui"}, {"coord.gone"})


def test_the_mirror_check_catches_a_folder_of_tests_for_no_package(tmp_path):
    modules = _plant(tmp_path, {**PLANTED, "tests/raft/test_core.py": "",
                                "tests/server/core/test_gone.py": "",
                                "tests/sm/data/frames.bin": ""})
    assert unmirrored(tmp_path, modules) == [
        "tests/server/core mirrors no package (coord.server.core)"]


def test_the_run_time_check_catches_a_module_that_loads_the_server():
    loaded = loaded_by("import coord.server.member")
    assert "coord.server.member" in heavy(loaded, ("coord.server",))
    assert "sqlite3" in heavy(loaded, ("sqlite3",))


# -- inside the member: server's parts, layered ---------------------------------------------

SERVER_LAYERS: tuple[tuple[str, ...], ...] = (
    ("member",),  # one member, wired: every part below
    ("config",),  # its configuration (defaults from the parts it configures)
    ("metrics",),  # what it tells Prometheus and load balancers: reads every part below
    ("api", "etcd"),  # the two client APIs: siblings, neither imports the other
    ("requests",),  # the request path both APIs share
    # the member's own jobs (the mode, deadlines, notes, compaction, quota); what the
    # request path asks of other members, and the leader's side
    ("upkeep", "forward"),
    ("node",),  # the consensus driver
    ("storage", "transport"),  # the log on disk, the wires
    ("snapshot_file",),  # a snapshot's bytes on disk: the log names it, the wires carry it
    # named crash points any part may pass (tests arm them); the log lines' stable fields
    # and event names any part may log with
    ("failpoints", "log_lines"),
)
"""coord.server's parts (a sub-package or a module directly under server/), top to
bottom. A part imports only parts of lower layers, so calls flow one way; parts of one
layer import none of each other."""


def server_part(module: str) -> str | None:
    """coord.server.requests.coordinator -> requests; None outside coord.server's parts."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["coord", "server"] and len(parts) > 2 else None


def upward_imports(imports: Iterable[Import],
                   layers: tuple[tuple[str, ...], ...] = SERVER_LAYERS) -> list[str]:
    """Every import between two of server's parts that does not go to a lower layer."""
    rank = {part: i for i, parts in enumerate(layers) for part in parts}
    out = []
    for i in imports:
        own, other = server_part(i.source), server_part(i.target)
        if own is None or other is None or own == other:
            continue
        if own not in rank or other not in rank:
            why = f"{own if own not in rank else other} is in no layer of SERVER_LAYERS"
        elif rank[own] == rank[other]:
            why = f"{own} and {other} are siblings"
        elif rank[own] > rank[other]:
            why = f"{other} is above {own}"
        else:
            continue
        out.append(f"{i.source}:{i.line} imports {i.target} ({i.kind}): {why}")
    return out


def test_server_parts_import_only_lower_layers():
    broken = upward_imports(IMPORTS)
    assert not broken, "\n".join(broken)


def test_every_server_part_has_a_layer():
    on_disk = {server_part(m) for m in MODULES} - {None}
    placed = {part for parts in SERVER_LAYERS for part in parts}
    assert on_disk == placed, (on_disk - placed, placed - on_disk)


SERVER_PLANTED = {
    "server/__init__.py": "",
    "server/member.py": "from coord.server.api import kv\n",  # down: fine
    "server/api/__init__.py": "",
    "server/api/kv.py": "from coord.server.requests.coordinator import Coordinator\n",  # down
    "server/etcd/__init__.py": "",
    "server/etcd/kv.py": "def put():\n    from coord.server.api import kv\n",  # a sibling
    "server/requests/__init__.py": "",
    "server/requests/coordinator.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from coord.server.api.kv import Service\n"),  # up
    "server/requests/liveness.py": "from coord.server.upkeep import session_tracker\n",  # down
    "server/upkeep/__init__.py": "",
    "server/upkeep/session_tracker.py": "from coord.server.node.driver import Node\n",  # down
    "server/upkeep/quorum_notes.py": "def note():\n    import coord.server.requests.coordinator\n",
    "server/upkeep/quota.py": "from coord.server.forward import link\n",  # a sibling
    "server/forward/__init__.py": "",
    "server/forward/link.py": "from coord.server.node import driver\n",  # down
    "server/node/__init__.py": "",
    "server/node/driver.py": "import coord.server.lab.probe\n",  # a part with no layer
    "server/lab/__init__.py": "",
    "server/lab/probe.py": "",
}


def test_the_server_layer_checker_catches_planted_upward_imports(tmp_path):
    broken = upward_imports(read_imports(_plant(tmp_path, SERVER_PLANTED)))
    assert broken == [
        "coord.server.etcd.kv:2 imports coord.server.api.kv (inside a function):"
        " etcd and api are siblings",
        "coord.server.node.driver:1 imports coord.server.lab.probe (module level):"
        " lab is in no layer of SERVER_LAYERS",
        "coord.server.requests.coordinator:3 imports coord.server.api.kv (under"
        " TYPE_CHECKING): api is above requests",
        "coord.server.upkeep.quorum_notes:2 imports coord.server.requests.coordinator"
        " (inside a function): requests is above upkeep",
        "coord.server.upkeep.quota:1 imports coord.server.forward.link (module level):"
        " upkeep and forward are siblings",
    ]
