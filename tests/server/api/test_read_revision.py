"""A read's answer names the revision it was read at: the header of GetOwner is the
revision of the state the owner was read from, even when something applies while the
caller's permission is checked (auth on: finding the caller's user awaits). The driver
of the fenced Spark writer logs that revision with its publish and the audit compares
it with coord's grants (`coord.audit.checks.sink_run`), so a later revision there would
show a correct publish as one made after a newer run had started."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from coord.server.api import common, ops
from coord.server.requests.coordinator import Coordinator
from coord.v1 import coord_pb2 as pb


class Machine:
    """The state: `revision`, and the revision the last query read (`read_at`)."""

    def __init__(self) -> None:
        self.revision = 7
        self.read_at: int | None = None
        self.auth = SimpleNamespace(enabled=False)

    def query(self, cmd: Any) -> Any:
        self.read_at = self.revision
        return SimpleNamespace(error="", resource=cmd.resource, owner=3, generation=2,
                               owner_revision=5)


class FakeCoordinator:
    header = Coordinator.header  # the real header: machine.revision, term, member
    read = Coordinator.read  # the real read: the barrier, the permission check, the query

    def __init__(self) -> None:
        self.machine = Machine()
        self.node = SimpleNamespace(term=1, me=SimpleNamespace(name="m1"))
        self.mode = SimpleNamespace(serving_writes=True)

    async def barrier(self, timeout: float) -> None:
        await asyncio.sleep(0)


def test_the_header_is_the_revision_the_owner_was_read_at(monkeypatch: pytest.MonkeyPatch):
    coord = FakeCoordinator()

    async def an_apply_meanwhile(coord: Any, caller: Any, cmd: Any) -> None:
        coord.machine.revision += 1  # applied while the check awaited the caller's user
        await asyncio.sleep(0)

    monkeypatch.setattr(common, "check_read", an_apply_meanwhile)
    req = pb.GetOwnerRequest(group="spark/j", resource="run")
    answer = asyncio.run(ops.get_owner(coord, common.Caller(5.0), req))
    assert coord.machine.read_at is not None
    assert answer.header.revision == coord.machine.read_at
    assert (answer.owner.generation, answer.owner.revision) == (2, 5)
