"""etcd_network_peer_round_trip_time_seconds: etcd's prober asks each peer over the peer
network every few seconds and times the answer; here every PROBE_INTERVAL_S this member
calls each other member's Forward.Describe over the peer port (authenticated, as
forwarding is) and times it. Only while metrics are on: nothing else sends it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from prometheus_client.core import Metric

from coord.server.forward.link import LeaderLink
from coord.server.metrics.tally import Tally, family
from coord.server.node.driver import Node
from coord.server.node.members import MemberInfo
from coord.server.upkeep.periodic import Periodic

PROBE_INTERVAL_S = 5.0
PROBE_TIMEOUT_S = 1.0
RTT_BUCKETS: tuple[float, ...] = tuple(0.0001 * 2 ** i for i in range(16))
"""etcd's: 100 us to 3.28 s."""


class PeerProbe:
    """Round trips to each other member, by its id (etcd's `To` label, in hex)."""

    def __init__(self, node: Node, link: LeaderLink) -> None:
        self.node, self.link = node, link
        self.round_trips: dict[int, Tally] = {}
        self.loop = Periodic(f"peer-probe-{node.me.name}", PROBE_INTERVAL_S, self.probe)

    async def probe(self) -> None:
        """One round: every other member asked at once; an answer missing is not timed."""
        peers = [m for mid, m in self.node.members.items() if mid != self.node.id]
        await asyncio.gather(*(self._time(m) for m in peers))

    async def _time(self, member: MemberInfo) -> None:
        started = time.perf_counter()
        if await self.link.describe(member, PROBE_TIMEOUT_S) is not None:
            tally = self.round_trips.get(member.id)
            if tally is None:
                tally = self.round_trips[member.id] = Tally(RTT_BUCKETS)
            tally.observe(time.perf_counter() - started)

    def collect(self) -> Iterator[Metric]:
        yield family("etcd_network_peer_round_trip_time_seconds", "Round-Trip-Time histogram"
                     " between peers (a Describe call over the peer port).",
                     (((f"{mid:x}",), t) for mid, t in sorted(self.round_trips.items())),
                     ["To"])
