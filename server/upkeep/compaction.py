"""Auto-compaction of the KV history (and with it the ownership history), etcd's way.

Without it every change ever made stays in memory (and in every snapshot) until a client
calls Compact, so a busy key grows a member without bound. etcd's flags, same meaning:

  --auto-compaction-mode periodic  --auto-compaction-retention 5m   (or "1" = 1 hour)
      keep at least the last 5 minutes of history. Every member samples its applied
      revision every retention/10 (at most every 6 minutes); every retention (at most
      every hour) the leader compacts to the newest revision it sampled at least a
      retention ago. A new leader has its own samples (followers sample too), so a
      failover neither compacts early nor stops compacting.
  --auto-compaction-mode revision  --auto-compaction-retention 100000
      keep the last 100000 revisions. etcd checks every 5 minutes; coord checks every
      second and compacts once the target has moved a tenth of the retention past the
      last compaction, so the history stays between 1x and 1.1x the retention.
  --auto-compaction-retention 0 turns it off (etcd's default; coord's is periodic 5m).

Only the decision is made here, from the leader's monotonic clock: the leader proposes
a `Compact(revision)` that is committed and applied like every other change, so every
member forgets the same history at the same log position and apply reads no clock.
Watches (KV, etcd and WatchOwners) that start below the compacted revision get the
`compacted` answer they get after a client's Compact.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coord.server import log_lines
from coord.server.upkeep.periodic import Periodic, deferring
from coord.sm.commands import Compact

log = logging.getLogger(__name__)

PERIODIC, REVISION = "periodic", "revision"
MODES = (PERIODIC, REVISION)
DEFAULT_MODE = PERIODIC
DEFAULT_RETENTION = "5m"
HOUR_S = 3600.0
REVISION_CHECK_S = 1.0
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": HOUR_S}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration ("5m", "1h30m", "90s", "500ms"); ValueError otherwise."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"not a duration: {text!r} (e.g. 5m, 1h, 30s)")
    return total


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """What `--auto-compaction-mode` and `--auto-compaction-retention` ask for. `retention`
    is seconds (periodic) or revisions (revision); 0 turns auto-compaction off."""

    mode: str = DEFAULT_MODE
    retention: float = 0

    @classmethod
    def parse(cls, mode: str, retention: str) -> CompactionPolicy:
        """etcd's reading of the two flags: in periodic mode a bare integer is hours, else
        a duration; in revision mode an integer count. ValueError names the flag."""
        if mode not in MODES:
            raise ValueError(f"--auto-compaction-mode must be one of {', '.join(MODES)}, "
                             f"got {mode!r}")
        text = retention.strip()
        if mode == REVISION:
            if not text.isdigit():
                raise ValueError("--auto-compaction-retention in revision mode is a count of "
                                 f"revisions to keep (e.g. 100000), got {retention!r}")
            return cls(mode, int(text))
        try:
            seconds = int(text) * HOUR_S if text.isdigit() else parse_duration(text)
        except ValueError as e:
            raise ValueError(f"--auto-compaction-retention in periodic mode is hours or a "
                             f"duration (e.g. 1, 5m, 30s): {e}") from None
        return cls(mode, seconds)

    @property
    def enabled(self) -> bool:
        return self.retention > 0

    @property
    def check_interval_s(self) -> float:
        """How often a member looks: a tenth of the retention (periodic, capped as etcd
        caps it at 6 minutes), every second (revision)."""
        if self.mode == REVISION:
            return REVISION_CHECK_S
        return min(self.retention, HOUR_S) / 10

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        if self.mode == REVISION:
            return f"revision, keep {int(self.retention)} revisions"
        return f"periodic, keep {self.retention:g}s"


class CompactionPlanner:
    """The decision, without clocks or I/O of its own: `observe(now, revision)` on every
    check (every member), `target(now, compacted)` on the leader: the revision to compact
    to, or None. Deterministic in its inputs, so it is tested without a cluster."""

    def __init__(self, policy: CompactionPolicy, now: float) -> None:
        self.policy = policy
        self._samples: deque[tuple[float, int]] = deque()  # (time, applied revision)
        self._last_compaction = now  # periodic: the first one a full retention after start

    def observe(self, now: float, revision: int) -> None:
        if self.policy.mode != PERIODIC:
            return
        self._samples.append((now, revision))
        cutoff = now - self.policy.retention
        # keep the newest sample at or before the cutoff and everything after it
        while len(self._samples) > 1 and self._samples[1][0] <= cutoff:
            self._samples.popleft()

    def target(self, now: float, revision: int, compacted: int) -> int | None:
        """The revision to compact to now, given the applied `revision` and the current
        compact revision; None if nothing is due."""
        retention = self.policy.retention
        if not self.policy.enabled:
            return None
        if self.policy.mode == REVISION:
            target = revision - int(retention)
            slack = max(1, int(retention) // 10)
            return target if target > 0 and target >= compacted + slack else None
        if now - self._last_compaction < min(retention, HOUR_S):
            return None
        if not self._samples or self._samples[0][0] > now - retention:
            return None  # nothing sampled a full retention ago yet
        target = self._samples[0][1]
        return target if target > compacted and target > 0 else None

    def compacted(self, now: float) -> None:
        """A compaction to the last target was committed (or was already done)."""
        self._last_compaction = now


class AutoCompactor:
    """The loop: every member samples, the caught-up leader proposes."""

    def __init__(
        self,
        policy: CompactionPolicy,
        leading: Callable[[], bool],
        revisions: Callable[[], tuple[int, int]],
        propose: Callable[[Compact], Awaitable[object]],
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`leading()`: this member is a caught-up leader; `revisions()`: the applied
        revision and the compact revision; `propose`: commit a command."""
        self.policy = policy
        self.leading = leading
        self.revisions = revisions
        self.propose = propose
        self.name = name
        self.clock = clock
        self.planner = CompactionPlanner(policy, clock())
        self._loop = Periodic("auto-compaction", policy.check_interval_s,
                              deferring(self.step, name, "auto-compaction"),
                              enabled=policy.enabled)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def step(self) -> int | None:
        """One check; the revision compacted to, if this step compacted."""
        now = self.clock()
        revision, compacted = self.revisions()
        self.planner.observe(now, revision)
        if not self.leading():
            return None
        target = self.planner.target(now, revision, compacted)
        if target is None:
            return None
        result = await self.propose(Compact(target))
        error = getattr(result, "error", "")
        if error and error != "COMPACTED":  # COMPACTED: someone got there first
            log.warning("%s: auto-compaction to %d refused: %s", self.name, target, error)
            return None
        self.planner.compacted(now)
        if not error:
            log.info("%s: auto-compacted history to revision %d (%s)", self.name, target,
                     self.policy.describe(), extra=log_lines.event(log_lines.COMPACTION))
        return None if error else target
