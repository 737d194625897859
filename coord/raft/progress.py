"""What the leader knows about each follower's log, and how fast it may send to it.

A follower is in one of three states: PROBE (we do not know where its log matches; send
one append at a time), REPLICATE (matched; pipeline appends up to the inflight limit) and
SNAPSHOT (its log is behind our compaction point; wait for the snapshot to land).
"""

from __future__ import annotations

from collections import deque
from enum import Enum


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Inflights:
    """Last indexes of the appends sent but not yet acknowledged, bounded in count."""

    __slots__ = ("capacity", "_queue")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._queue: deque[int] = deque()

    def add(self, last_index: int) -> None:
        self._queue.append(last_index)

    def free_le(self, index: int) -> None:
        q = self._queue
        while q and q[0] <= index:
            q.popleft()

    def free_first_one(self) -> None:
        if self._queue:
            self._queue.popleft()

    @property
    def full(self) -> bool:
        return len(self._queue) >= self.capacity

    def __len__(self) -> int:
        return len(self._queue)

    def reset(self) -> None:
        self._queue.clear()


class Progress:
    __slots__ = (
        "match",
        "next",
        "state",
        "probe_sent",
        "pending_snapshot",
        "last_active_tick",
        "inflights",
        "is_learner",
    )

    def __init__(self, next_index: int, max_inflight: int, is_learner: bool = False) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.last_active_tick = -(10**9)
        self.inflights = Inflights(max_inflight)
        self.is_learner = is_learner

    def _reset_state(self, state: ProgressState) -> None:
        self.probe_sent = False
        self.pending_snapshot = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset_state(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def maybe_update(self, index: int) -> bool:
        """An acknowledgement up to `index` arrived; False if it told us nothing new."""
        updated = False
        if self.match < index:
            self.match = index
            updated = True
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def optimistic_update(self, index: int) -> None:
        self.next = index + 1

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """A rejection of the append at `rejected`; False if it is stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), 1)
        self.probe_sent = False
        return True

    @property
    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return self.inflights.full
        return True
