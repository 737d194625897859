"""A write whose attempt may have been applied is never answered "not applied" later.

Found by `coord chaos` (seed 103, a throttled member): the member forwarded a put, the
forward timed out while the leader committed it, the member then went read-only, and
the write's retry loop answered READ_ONLY, which the client reports as "the write was
not applied". The history showed the value read back afterwards. With a fake node: the
first proposal times out and the member loses its quorum meanwhile; the caller must get
OUTCOME_UNKNOWN (the client retries it under the same request id), while a member
already cut off before any attempt still refuses plainly."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coord.server.node.driver import NodeOptions
from coord.server.node.errors import OutcomeUnknown, Timeout
from coord.server.requests.coordinator import Coordinator
from coord.server.upkeep.mode import NO_QUORUM, Refused
from coord.sm import commands as c
from coord.sm.machine import CoordMachine


class _LeaderThatTimesOut:
    """Just enough of a Node: a leader whose proposals time out (the entry may commit),
    and, on the first one, the member's mode turning no-quorum (via `on_propose`)."""

    def __init__(self) -> None:
        self.options = NodeOptions()
        self.me = SimpleNamespace(name="n3")
        self.term = 1
        self.is_leader = True
        self.proposals = 0
        self.on_propose = lambda: None

    def quorum_lost_for(self) -> float:
        return 1.0

    async def propose(self, payload: bytes, timeout: float):
        self.proposals += 1
        self.on_propose()
        raise Timeout("no quorum answered in time")


def _put() -> c.Command:
    return c.Put(b"k", b"v", request_id="req-1")  # retry-safe: it carries an id


def test_a_refusal_after_an_uncertain_attempt_is_outcome_unknown():
    async def run() -> None:
        node = _LeaderThatTimesOut()
        coord = Coordinator(node, CoordMachine(), link=None)
        node.on_propose = lambda: coord.mode._switch(NO_QUORUM)
        with pytest.raises(OutcomeUnknown, match="may have been applied"):
            await coord.write(_put(), timeout=2.0)
        assert node.proposals == 1

    asyncio.run(run())


def test_a_member_cut_off_before_any_attempt_still_refuses():
    async def run() -> None:
        node = _LeaderThatTimesOut()
        coord = Coordinator(node, CoordMachine(), link=None)
        coord.mode._switch(NO_QUORUM)
        with pytest.raises(Refused):
            await coord.write(_put(), timeout=2.0)
        assert node.proposals == 0

    asyncio.run(run())

