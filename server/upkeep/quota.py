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

The disk it writes to can fill before any quota is reached (other files, a small
volume). So the member also measures the free space of its data dir's file system and
raises the same alarm when less than `--disk-reserve-bytes` is left, lowering it once
the free space is back over the reserve by a tenth: writes stop while the member can
still write its log (the alarm itself, deletes, compaction), rather than at ENOSPC, where
a log write fails and the member must stop (it cannot go on after a failed write).

The decision to refuse is the log's, never a member's clock or disk read inside apply:
a write is refused whole or applied whole, the same on every member.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coord.server import log_lines
from coord.server.upkeep.periodic import Periodic, deferring
from coord.sm.alarms import ACTIVATE, DEACTIVATE, NOSPACE
from coord.sm.commands import Alarm
from coord.sm.machine import CoordMachine

log = logging.getLogger(__name__)

DEFAULT_QUOTA_BYTES = 2 << 30  # etcd's default
DEFAULT_DISK_RESERVE_BYTES = 32 << 20
CHECK_INTERVAL_S = 1.0
LOW_WATER = 0.9  # lowered below this share of the quota, so it does not flap


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still add to `path`'s file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@dataclass(frozen=True, slots=True)
class Usage:
    state_bytes: int
    disk_bytes: int
    free_bytes: int | None = None  # on the data dir's file system; None: not measured

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
        free_bytes: Callable[[], Awaitable[int]] | None = None,
        reserve_bytes: int = 0,
    ) -> None:
        """`disk_bytes()`: the store's bytes in use; `propose`: commit a command;
        `request_snapshot()`: ask the node to snapshot (and truncate its log) now;
        `free_bytes()`: the free space where the store is, held against `reserve_bytes`.
        A quota of 0 turns the quota off, a reserve of 0 the free-space check."""
        self.quota_bytes = quota_bytes
        self.member_id = member_id
        self.machine = machine
        self.disk_bytes = disk_bytes
        self.propose = propose
        self.request_snapshot = request_snapshot
        self.name = name
        self.free_bytes = free_bytes
        self.reserve_bytes = reserve_bytes if free_bytes is not None else 0
        self.usage = Usage(0, 0)
        self._loop = Periodic("space-guard", CHECK_INTERVAL_S,
                              deferring(self.step, name, "space alarm change"),
                              enabled=quota_bytes > 0 or self.reserve_bytes > 0)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def step(self) -> str | None:
        """One measurement; the alarm action proposed, if any."""
        free = await self.free_bytes() if self.free_bytes and self.reserve_bytes else None
        self.usage = usage = Usage(self.machine.state_bytes(), await self.disk_bytes(), free)
        raised = self.machine.alarms.has(self.member_id, NOSPACE)
        quota, low = self.quota_bytes, self.quota_bytes * LOW_WATER
        if quota and usage.state_bytes <= low < usage.disk_bytes:
            self.request_snapshot()  # the log holds the space: truncate it
        if not raised:
            over = bool(quota) and usage.used > quota
            short = free is not None and free < self.reserve_bytes
            if not (over or short):
                return None
            why = (f"over its space quota (state {usage.state_bytes} bytes, store "
                   f"{usage.disk_bytes} bytes in use; quota {quota})" if over else
                   f"short of disk ({free} bytes free, under the reserve of "
                   f"{self.reserve_bytes})")
            log.warning("%s: %s: raising NOSPACE, writes that add state are refused",
                        self.name, why, extra=log_lines.event(log_lines.ALARM))
            await self.propose(Alarm(ACTIVATE, self.member_id, NOSPACE))
            return ACTIVATE
        if (quota and usage.used > low) or (free is not None
                                            and free * LOW_WATER < self.reserve_bytes):
            return None
        log.info("%s: back under its space quota (%d of %d bytes) with %s bytes free: "
                 "lowering NOSPACE", self.name, usage.used, quota,
                 "unmeasured" if free is None else free,
                 extra=log_lines.event(log_lines.ALARM))
        await self.propose(Alarm(DEACTIVATE, self.member_id, NOSPACE))
        return DEACTIVATE
