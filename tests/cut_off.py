"""Cutting members of a real cluster off (SIGSTOP, or a netfault gate) and watching, from
the test's thread, the one left alone go read-only and come back: which member to leave,
its mode, events read off queues, and waits bounded in time (`tests/server/waits.py`
has the wait for a test that runs inside its event loop)."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

import grpc
import pytest

from coord.testing import LocalCluster


def split_off(cluster: LocalCluster, role: str) -> tuple[str, list[str]]:
    """The member left alone (the leader, or a follower) and the others, to pause or cut off."""
    leader = cluster.wait_for_leader()
    kept = leader if role == "leader" else next(n for n in cluster.members if n != leader)
    return kept, [n for n in cluster.members if n != kept]


def resume_paused(cluster: LocalCluster, names: list[str]) -> None:
    """SIGCONT whichever of `names` a test left stopped (a test that failed midway)."""
    for n in names:
        if cluster.members[n].paused:
            cluster.resume(n)


def mode_of(cluster: LocalCluster, name: str) -> str:
    try:
        return cluster.status(name).mode
    except grpc.RpcError:
        return "?"


def wait_until(what: str, check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Poll `check` every 20 ms; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    pytest.fail(f"{what}: not within {timeout}s")


def pump(stream, out: queue.Queue) -> None:
    """Stream items into `out`; the error that ends it, too (so a test can say why)."""
    try:
        for item in stream:
            out.put(item)
    except Exception as e:  # noqa: BLE001 - handed to the test
        out.put(e)


def next_matching(items: queue.Queue, what: str, match: Callable, timeout: float = 5.0):
    """The first item from `items` that `match`es, within `timeout` (else the test fails
    naming what it saw)."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = items.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if match(item):
            return item
        seen.append(item)
    pytest.fail(f"no {what} within {timeout}s (saw {seen})")


def next_event(events: queue.Queue, kind: str, mode: str, timeout: float = 5.0):
    return next_matching(events, f"{kind} {mode} event",
                         lambda e: e.type == kind and e.mode == mode, timeout)
