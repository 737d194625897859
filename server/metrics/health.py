"""etcd's `/health` answer for one member, and `/readyz`'s checks: a member is healthy when
it serves writes (not read-only: the first reason given, since a read-only member has
also lost its leader), knows a leader, no NOSPACE alarm is raised, and a linearizable
read barrier (etcd's QGET) completes in time."""

from __future__ import annotations

import json
from dataclasses import dataclass

from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.upkeep.mode import READ_ONLY, READ_WRITE, ModeMonitor
from coord.sm.alarms import NOSPACE
from coord.sm.machine import CoordMachine

BARRIER_TIMEOUT_S = 1.0
"""The read barrier's deadline: etcd's /health waits about as long for its QGET."""


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # /readyz's name for it
    ok: bool
    reason: str  # /health's reason when not ok ("" when ok)


async def checks(node: Node, mode: ModeMonitor, machine: CoordMachine) -> list[Check]:
    """Every check, in order; the barrier only when the cheaper ones passed (a member
    without a leader or quorum would only wait out its timeout)."""
    serving = mode.mode == READ_WRITE
    out = [Check("read_write", serving, "" if serving else (
        "READ ONLY MODE" if mode.mode == READ_ONLY else "RAFT NO QUORUM"))]
    leader = node.leader is not None
    out.append(Check("leader", leader, "" if leader else "RAFT NO LEADER"))
    no_space = any(kind == NOSPACE for _, kind in machine.alarms.active())
    out.append(Check("no_alarm", not no_space, "ALARM NOSPACE" if no_space else ""))
    if all(c.ok for c in out):
        try:
            await node.read_index(BARRIER_TIMEOUT_S)
            out.append(Check("linearizable_read", True, ""))
        except NodeError as e:
            out.append(Check("linearizable_read", False, f"QGET ERROR: {e}"))
    return out


def health_body(found: list[Check]) -> tuple[bool, bytes]:
    """etcd's JSON: {"health":"true","reason":""}, or "false" with the first failure's
    reason."""
    failed = next((c for c in found if not c.ok), None)
    body = {"health": "false" if failed else "true", "reason": failed.reason if failed else ""}
    return failed is None, json.dumps(body, separators=(",", ":")).encode()


def readyz_body(found: list[Check]) -> tuple[bool, bytes]:
    """One line per check ("[+]name ok" / "[-]name failed: reason"), then the verdict, as
    etcd's (and Kubernetes') /readyz?verbose writes it."""
    lines = [f"[+]{c.name} ok" if c.ok else f"[-]{c.name} failed: {c.reason}" for c in found]
    ok = all(c.ok for c in found)
    lines.append("ok" if ok else "readyz check failed")
    return ok, ("\n".join(lines) + "\n").encode()
