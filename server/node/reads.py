"""The node's linearizable reads: the ReadIndex rounds the waiting reads share, and the
waits for this member to have applied the log up to an index.

Its own module because a read's life is bookkeeping of its own — the round in flight,
the reads each round carries, the convoy's timer, the reads whose index is known and
which wait for the apply — that touches the driver only at two points: the driver asks
it to start a round on each turn, and hands it each Ready's read states and each new
applied index.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from coord.raft import RawNode, Ready
from coord.server.node.read_convoy import ReadConvoy


class Reads:
    """The reads waiting for a round, the rounds in flight, and the waits for an index
    to be applied; the driver resolves them, the facade (`Node`) adds them."""

    def __init__(
        self, raw: RawNode, election_ticks: int, convoy_window: float, wake: Callable[[], None]
    ) -> None:
        """`convoy_window`: seconds (read_convoy.py); `wake()` makes the driver look
        again (a read arrived, or the convoy's window passed)."""
        self._raw = raw
        self._election_ticks = election_ticks
        self._wake = wake
        self.waiting: list[asyncio.Future] = []
        self.contexts: dict[bytes, list[asyncio.Future]] = {}  # a round's reads
        self.round: bytes | None = None  # the ReadIndex round in flight, if any
        self.round_tick = 0
        self._convoy = ReadConvoy(convoy_window)
        self.convoy_timer: asyncio.TimerHandle | None = None
        self.applied_waiters: list[tuple[int, asyncio.Future]] = []
        self._ctx = itertools.count(1)

    def add(self, fut: asyncio.Future) -> None:
        """A read that waits for the next round."""
        if not self.waiting:
            self._convoy.arrived(time.monotonic())
        self.waiting.append(fut)
        self._wake()

    def wait_applied(self, index: int, fut: asyncio.Future) -> None:
        """`fut` gets `index` once the member has applied up to it."""
        self.applied_waiters.append((index, fut))

    def maybe_start_round(self) -> None:
        """Start one ReadIndex round for every read waiting, unless one is in flight or
        the convoy holds it (`read_convoy`: after a shared round, the next waits a moment
        for as many reads).

        As etcd's read loop: reads that arrive during a round wait for it to end and then
        share the next one (they cannot join it: its index was taken before they came),
        so N concurrent reads cost one heartbeat round, not N. A round left unanswered
        (leadership moved, a message lost) stops holding the next one back after half an
        election timeout."""
        if not self.waiting:
            return
        if self.round is not None and (
            self._raw.now - self.round_tick < max(1, self._election_ticks // 2)
        ):
            return
        now = time.monotonic()
        due = self._convoy.hold_until(len(self.waiting), now)
        if due is not None:
            if self.convoy_timer is None:
                loop = asyncio.get_running_loop()
                self.convoy_timer = loop.call_later(due - now, self._convoy_due)
            return
        self._convoy.started(len(self.waiting))
        ctx = next(self._ctx).to_bytes(8, "big")
        self.contexts[ctx] = self.waiting
        self.waiting = []
        self.round, self.round_tick = ctx, self._raw.now
        self._raw.read_index(ctx)

    def _convoy_due(self) -> None:
        self.convoy_timer = None
        self._wake()

    def on_ready(self, rd: Ready) -> None:
        """A Ready's answers: each read state's reads now wait for its index to apply."""
        if rd.soft_state is not None:
            self.round = None  # the leader or role changed: its answer may never come
        for rs in rd.read_states:
            if rs.context == self.round:
                self.round = None
            reads = self.contexts.pop(rs.context, None)
            if reads is not None:
                for fut in reads:
                    self.applied_waiters.append((rs.index, fut))

    def release(self, applied_index: int) -> None:
        """Resolve the waits for an index up to `applied_index`."""
        if not self.applied_waiters:
            return
        still = []
        for index, fut in self.applied_waiters:
            if fut.done():
                continue
            if index <= applied_index:
                fut.set_result(index)
            else:
                still.append((index, fut))
        self.applied_waiters = still

    def stop(self) -> None:
        if self.convoy_timer is not None:
            self.convoy_timer.cancel()

    def futures(self) -> list[asyncio.Future]:
        """Every read still waiting, to fail when the member stops."""
        futures = self.waiting + [f for r in self.contexts.values() for f in r]
        return futures + [f for _, f in self.applied_waiters]
