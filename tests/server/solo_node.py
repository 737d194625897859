"""A one-member cluster in process, on a test's temp directory: its node elects itself
within a few ticks, so a test can propose and read through the real driver alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from coord.server.member import NodeParts, open_node
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.members import MemberInfo
from coord.sm.machine import CoordMachine
from tests.server.waits import wait_until

SOLO = MemberInfo("solo", "127.0.0.1:1")


def solo_node(path: Path, machine: CoordMachine | None = None, **options: Any) -> NodeParts:
    """Opened, not started; `options` are NodeOptions beyond its fast ticks."""
    fast = {"tick_ms": 10, "election_ticks": 4, "seed": 1}
    return open_node(SOLO, path, machine if machine is not None else CoordMachine(), [SOLO],
                     b"secret", NodeOptions(**{**fast, **options}))


async def leading(path: Path, machine: CoordMachine | None = None, **options: Any) -> NodeParts:
    """`solo_node`, started, once it is a caught-up leader (closed if not within 5 s)."""
    parts = solo_node(path, machine, **options)
    await parts.node.start()
    try:
        await wait_until(lambda: parts.node.is_leader and parts.node.caught_up_leader,
                         "the one-member cluster's leader", 5.0)
    except AssertionError:
        await parts.close()
        raise
    return parts


def on_leader(path: Path, body: Callable[[Node], Awaitable[None]],
              machine: CoordMachine | None = None) -> None:
    """Run `await body(node)` on a fresh leader, then close it."""

    async def run() -> None:
        parts = await leading(path, machine)
        try:
            await body(parts.node)
        finally:
            await parts.close()

    asyncio.run(run())
