"""What the driver is handed between its turns: the peers' messages, the peers found
unreachable and the ticks, kept until its next turn steps them into the core.

Its own module because these arrive from elsewhere (the transport's tasks, the ticker)
at any time, and the driver takes them all at once, in its own turn, so the core is only
ever touched by the driver's task.
"""

from __future__ import annotations

from collections.abc import Callable

from coord.raft import Message, RawNode
from coord.server.node.round_counts import RoundCounts
from coord.server.node.snapshots import drop_if_refused
from coord.server.snapshot_file import SnapshotFile


class Inbox:
    """The inputs waiting for the driver's next turn; each one wakes the driver."""

    def __init__(self, counts: RoundCounts, wake: Callable[[], None]) -> None:
        self._counts = counts
        self._wake = wake
        self._messages: list[Message] = []
        self._unreachable: set[int] = set()
        self._ticks = 0
        self._closed = False

    def on_messages(self, messages: list[Message]) -> None:
        if self._closed:
            _remove_snapshot_files(messages)
            return
        self._counts.messages_received += len(messages)
        self._messages.extend(messages)
        self._wake()

    def on_unreachable(self, node: int) -> None:
        self._unreachable.add(node)
        self._wake()

    def on_tick(self) -> None:
        self._ticks += 1
        self._wake()

    def step(self, raw: RawNode) -> None:
        """Step the messages into `raw`, and report the peers found unreachable."""
        if self._messages:
            inbox, self._messages = self._messages, []
            for i, m in enumerate(inbox):
                try:
                    raw.step(m)
                except BaseException:
                    # The driver ends with this error: the snapshots it did not take
                    # (this one unless Raft took it, and the unstepped) would stay
                    # until the next start's sweep.
                    if m.snapshot is not None:
                        drop_if_refused(raw, m.snapshot)
                    _remove_snapshot_files(inbox[i + 1:])
                    raise
                if m.snapshot is not None:
                    drop_if_refused(raw, m.snapshot)
        if self._unreachable:
            for node in self._unreachable:
                raw.report_unreachable(node)
            self._unreachable.clear()

    def close(self) -> None:
        """The driver has stopped: remove the files of the snapshots still waiting for
        it, and of any that arrive later, since nothing will step them."""
        self._closed = True
        waiting, self._messages = self._messages, []
        _remove_snapshot_files(waiting)

    def tick(self, raw: RawNode) -> None:
        """Tick `raw` once per tick that came."""
        while self._ticks:
            self._ticks -= 1
            raw.tick()


def _remove_snapshot_files(messages: list[Message]) -> None:
    """Remove the files of the received snapshots in `messages`, which Raft never saw."""
    for m in messages:
        if m.snapshot is not None and isinstance(m.snapshot.data, SnapshotFile):
            m.snapshot.data.remove()
