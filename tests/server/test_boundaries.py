"""The node's boundaries, enforced on the source: the driver sees the Raft core only
through RawNode's API, and nothing outside `server/node/` reaches through a node for its
parts (storage, transport, state machine, core) — whoever needs one is given it by
`server/member.py`. The peer transport's inbound connections use the transport's public methods."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("coord", "server", "client")

NODE_PARTS = frozenset({"transport", "store", "sm", "raw",
                        "_transport", "_store", "_sm", "_raw", "_snaps", "_io", "_persist",
                        "_proposals", "_reads", "_applier", "_membership", "_soft_state",
                        "_first_election"})
"""What a node was given or holds; never to be reached through it from outside."""


def _names_a_node(expr: ast.expr) -> bool:
    """`node`, `self.node`, `x.node`, `coord.node`, ... (how code here names a Node)."""
    if isinstance(expr, ast.Name):
        return expr.id == "node"
    return isinstance(expr, ast.Attribute) and expr.attr == "node"


def violations(source: str, path: str) -> list[str]:
    """The boundary crossings in one module's source (`path` is relative to the repo:
    it decides which rules apply)."""
    in_core = path.startswith(("coord/raft/", "coord/rafttest/"))  # the core, its simulator
    in_node = path.startswith("server/node/")
    in_transport = path.startswith("server/transport/")
    found = []
    for n in ast.walk(ast.parse(source)):
        if not isinstance(n, ast.Attribute):
            continue
        where = f"{path}:{n.lineno}: {ast.unparse(n)}"
        if n.attr == "raft" and not in_core and not (
            isinstance(n.value, ast.Name) and n.value.id == "coord"
        ):
            found.append(f"{where} (the Raft core behind RawNode)")
        # (the Raft simulator's SimNode, beside the core, holds its own raw node)
        if n.attr in NODE_PARTS and _names_a_node(n.value) and not (in_node or in_core):
            found.append(f"{where} (a node's part, reached through the node)")
        if (in_transport and n.attr.startswith("_") and not n.attr.startswith("__")
                and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))):
            found.append(f"{where} (another object's private field)")
    return found


def _production_modules() -> list[Path]:
    return [p for top in PRODUCTION for p in sorted((ROOT / top).rglob("*.py"))
            if "_pb2" not in p.name]


def test_no_module_crosses_the_node_boundaries():
    found = [v for p in _production_modules()
             for v in violations(p.read_text(), p.relative_to(ROOT).as_posix())]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source, path", [
    ("x = self._raw.raft.term", "server/node/driver.py"),
    ("leader = raw.raft.lead", "server/upkeep/mode.py"),
    ("size = os.path.getsize(node.store.path)", "server/etcd/cluster.py"),
    ("await self.node.transport.authenticate(context)", "server/forward/service.py"),
    ("d = self.coord.node.sm.describe()", "server/api/admin.py"),
    ("r = node._raw", "coord/bench/raft.py"),
    ("if t._closed: pass", "server/transport/peer.py"),
])
def test_a_planted_crossing_is_caught(source: str, path: str):
    assert violations(source, path)


@pytest.mark.parametrize("source, path", [
    ("x = self.raft.term", "coord/raft/rawnode.py"),  # the core itself
    ("self._transport.send(msgs)", "server/node/driver.py"),  # the node's own part
    ("import coord.raft\ny = coord.raft.NONE", "server/node/driver.py"),
    ("if self._closed: pass", "server/transport/peer.py"),
    ("status = self.node.status()", "server/api/admin.py"),
])
def test_what_stays_inside_its_boundary_passes(source: str, path: str):
    assert violations(source, path) == []
