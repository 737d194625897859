"""The node's proposals: what callers asked to replicate, batched into the log, and the
entries proposed whose callers wait for them to apply.

Its own module because group commit is a rule of its own (`Proposals.maybe_submit`),
with state of its own (the batch in flight, until when appends go to the storage thread),
and the driver needs only three things of it: submit what waits on each turn, settle a
caller as its entry applies, and fail callers when a snapshot covers their entries or
the member stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from coord.raft import ConfChange, Entry, NotLeaderError, ProposalDroppedError, RawNode
from coord.server.node.errors import NodeError, NotLeader, OutcomeUnknown, ProposalLost
from coord.server.node.members import MemberInfo
from coord.server.storage.log_format import entry_data
from coord.sm.results import Answer

CONCURRENT_WINDOW_S = 0.05
"""How long, after the last batch that callers waited behind, a leader appends its
batches in the storage thread, however small: a small append fsync'd on the loop holds
the loop, and gRPC admits no new call meanwhile (its asyncio server takes calls on loop
turns), so under unary load the next batch was the one call admitted after it and
batches stayed at one. Each batch held behind another opens the window again, so under
steady load it never closes. Its length: a commit round is milliseconds (an fsync here,
one on a follower, a message each way), so 50 ms outlasts several rounds even on a slow
disk, and a burst's callers, coming back one by one or after a round's pause, keep the
loop free for gRPC's admissions; yet a lone put that comes 50 ms after a burst, whatever
came between, is saved on the loop again rather than paying a thread hop it does not
need (a count of batches, run down per batch, sent it there however long after). A wrong
guess costs little either way: a thread hop, or one small batch fsync'd on the loop
before callers wait behind it and open the window again. On `time.monotonic`: this is
the proposal path, not the state machine's apply, which must stay deterministic."""


@dataclass(frozen=True, slots=True)
class Applied:
    """Where a proposal landed in the log, and what the state machine answered."""

    index: int
    term: int
    result: Answer | None


@dataclass(slots=True)
class _Proposal:
    payload: bytes
    future: asyncio.Future
    conf_change: ConfChange | None = None


@dataclass(slots=True)
class _Pending:
    term: int
    future: asyncio.Future


class Proposals:
    """Proposals waiting to be proposed, and those proposed and waiting to apply."""

    def __init__(
        self, raw: RawNode, max_batch: int, leader: Callable[[], MemberInfo | None]
    ) -> None:
        """`leader()`: the leader as this member knows it, for a NotLeader to name."""
        self._raw = raw
        self._max_batch = max_batch
        self._leader = leader
        self._waiting: list[_Proposal] = []
        self._pending: dict[int, _Pending] = {}
        self._batch_term = 0  # the term and last index of the last batch proposed
        self._batch_last = 0
        self._held = False  # a proposal waited behind the batch in flight
        self._concurrent_until = float("-inf")  # monotonic: appends off the loop until then

    def __len__(self) -> int:
        """Proposals waiting to be proposed or, proposed, to be applied."""
        return len(self._waiting) + len(self._pending)

    @property
    def concurrent(self) -> bool:
        """Does the next append go to the storage thread (CONCURRENT_WINDOW_S)?"""
        return time.monotonic() < self._concurrent_until

    def add(
        self, payload: bytes, fut: asyncio.Future, conf_change: ConfChange | None = None
    ) -> None:
        self._waiting.append(_Proposal(payload, fut, conf_change))

    def maybe_submit(self, applied_index: int) -> None:
        """Propose what waits, unless this leader's last batch is still uncommitted.

        Group commit, as reads share the next ReadIndex round: proposals that come while
        a batch is in flight wait for it to apply and then go out together, so callers
        that arrive one by one (a unary call each) share one append, one fsync on every
        member and one AppendEntries per follower instead of paying for a few entries
        each. A lone caller never waits (nothing is in flight), and under load the batch
        grows with the commit latency. Only a leader holds back, and only behind a batch
        of its own term: anyone else proposes at once and is refused at once
        (NotLeader), so nothing waits behind entries that may never apply here."""
        if not self._waiting:
            return
        raw = self._raw
        if raw.is_leader and self._batch_term == raw.term and self._batch_last > applied_index:
            self._held = True
            return
        self._submit()

    def _submit(self) -> None:
        proposals, self._waiting = self._waiting, []
        if self._held:
            self._concurrent_until = time.monotonic() + CONCURRENT_WINDOW_S
            self._held = False
        now_ms = time.time_ns() // 1_000_000
        live = [p for p in proposals if not p.future.done()]
        normal = [p for p in live if p.conf_change is None]
        batches: list[list[_Proposal]] = [
            normal[i : i + self._max_batch] for i in range(0, len(normal), self._max_batch)
        ]
        batches += [[p] for p in live if p.conf_change is not None]
        for n, batch in enumerate(batches):
            try:
                cc = batch[0].conf_change
                if cc is not None:
                    first, term = self._raw.propose_conf_change(cc)
                else:
                    first, term = self._raw.propose([entry_data(now_ms, p.payload) for p in batch])
            except (NotLeaderError, ProposalDroppedError) as e:
                err: NodeError = (
                    NotLeader(self._leader())
                    if isinstance(e, NotLeaderError)
                    else ProposalLost(str(e))
                )
                for rest in batches[n:] if isinstance(e, NotLeaderError) else [batch]:
                    for p in rest:
                        p.future.set_exception(err)
                if isinstance(e, NotLeaderError):
                    return
                continue
            for i, p in enumerate(batch):
                self._pending[first + i] = _Pending(term, p.future)
            self._batch_term, self._batch_last = term, first + len(batch) - 1

    def settle(self, e: Entry, result: Answer | None) -> None:
        """`e` applied: its caller, if it waits here, gets `result`, or ProposalLost if
        the entry at its index is another leader's."""
        pending = self._pending.pop(e.index, None)
        if pending is not None and not pending.future.done():
            if pending.term == e.term:
                pending.future.set_result(Applied(e.index, e.term, result))
            else:
                pending.future.set_exception(
                    ProposalLost(f"entry {e.index} was replaced after a leader change")
                )

    def fail_upto(self, index: int) -> None:
        """A snapshot up to `index` was installed: its entries were never seen here."""
        for i in [i for i in self._pending if i <= index]:
            p = self._pending.pop(i)
            if not p.future.done():
                p.future.set_exception(
                    OutcomeUnknown(f"entry {i} was covered by a snapshot before it was seen")
                )

    def take_futures(self) -> list[asyncio.Future]:
        """Every caller still waiting, to fail when the member stops; no entry is
        awaited any more."""
        futures = [p.future for p in self._pending.values()]
        futures += [p.future for p in self._waiting]
        self._pending.clear()
        return futures
