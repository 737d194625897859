"""The space quota of one member (`--quota-backend-bytes`, etcd's flag and NOSPACE alarm).

Every second the member measures itself two ways — the state machine's estimated size
(`CoordMachine.state_bytes`: values, history, sessions, owners) and the bytes of its
SQLite store that hold data (log and snapshot) — and holds the larger against the
quota. Over it, the member proposes `Alarm(activate, its id)`: once committed, every
member refuses writes that add state with NO_SPACE (coord.sm.alarms), while reads,
deletes, releases and compaction go on. Back under 90% of the quota, the member
proposes `Alarm(deactivate)` and writes resume: no operator step is needed (etcd needs
`alarm disarm`; coord does it for you, and `etcdctl alarm disarm` works too).

When the state is small again but the store is not, the log is what holds the space:
the member asks its node for a snapshot now, which truncates the log, and its free
pages are reused (`coord defrag` gives them back to the file system).

The decision to refuse is the log's, never a member's clock or disk read inside apply:
a write is refused whole or applied whole, the same on every member.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coord.server.upkeep.periodic import Periodic, deferring
from coord.sm.alarms import ACTIVATE, DEACTIVATE, NOSPACE
from coord.sm.commands import Alarm
from coord.sm.machine import CoordMachine

log = logging.getLogger(__name__)

DEFAULT_QUOTA_BYTES = 2 << 30  # etcd's default
CHECK_INTERVAL_S = 1.0
LOW_WATER = 0.9  # lowered below this share of the quota, so it does not flap


@dataclass(frozen=True, slots=True)
class Usage:
    state_bytes: int
    disk_bytes: int

    @property
    def used(self) -> int:
        return max(self.state_bytes, self.disk_bytes)


class SpaceGuard:
    def __init__(
        self,
        quota_bytes: int,
        member_id: int,
        machine: CoordMachine,
        disk_bytes: Callable[[], Awaitable[int]],
        propose: Callable[[Alarm], Awaitable[object]],
        request_snapshot: Callable[[], None],
        name: str = "",
    ) -> None:
        """`disk_bytes()`: the store's bytes in use; `propose`: commit a command;
        `request_snapshot()`: ask the node to snapshot (and truncate its log) now.
        A quota of 0 turns the guard off."""
        self.quota_bytes = quota_bytes
        self.member_id = member_id
        self.machine = machine
        self.disk_bytes = disk_bytes
        self.propose = propose
        self.request_snapshot = request_snapshot
        self.name = name
        self.usage = Usage(0, 0)
        self._loop = Periodic("space-guard", CHECK_INTERVAL_S,
                              deferring(self.step, name, "space alarm change"),
                              enabled=quota_bytes > 0)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def step(self) -> str | None:
        """One measurement; the alarm action proposed, if any."""
        self.usage = usage = Usage(self.machine.state_bytes(), await self.disk_bytes())
        raised = self.machine.alarms.has(self.member_id, NOSPACE)
        low = self.quota_bytes * LOW_WATER
        if usage.state_bytes <= low < usage.disk_bytes:
            self.request_snapshot()  # the log holds the space: truncate it
        if not raised:
            if usage.used <= self.quota_bytes:
                return None
            log.warning("%s: over its space quota (state %d bytes, store %d bytes in use; "
                        "quota %d): raising NOSPACE, writes that add state are refused",
                        self.name, usage.state_bytes, usage.disk_bytes, self.quota_bytes)
            await self.propose(Alarm(ACTIVATE, self.member_id, NOSPACE))
            return ACTIVATE
        if usage.used > low:
            return None
        log.info("%s: back under its space quota (%d of %d bytes): lowering NOSPACE",
                 self.name, usage.used, self.quota_bytes)
        await self.propose(Alarm(DEACTIVATE, self.member_id, NOSPACE))
        return DEACTIVATE
