"""Applying committed entries: each one to the state machine or, a conf change, to the
core and the members; its caller told the answer; the listeners told once per Ready.

Its own module because applying is the one place entries become state, and must stay
deterministic (no clock, randomness or I/O here: the entry carries the leader's time);
the driver only hands it each Ready's committed entries, in order.
"""

from __future__ import annotations

from collections.abc import Callable

from coord.raft import Entry, EntryType, RawNode, conf_change_of
from coord.server import failpoints
from coord.server.node.membership import Membership
from coord.server.node.proposals import Proposals
from coord.server.node.snapshots import Snapshots
from coord.server.node.statemachine import StateMachine
from coord.server.storage.log_format import split_entry_data
from coord.sm.results import Answer


class Applier:
    """The index applied last, and the entries applied after it."""

    def __init__(
        self,
        raw: RawNode,
        sm: StateMachine,
        membership: Membership,
        proposals: Proposals,
        snaps: Snapshots,
    ) -> None:
        self._raw = raw
        self._sm = sm
        self._membership = membership
        self._proposals = proposals
        self._snaps = snaps
        self.applied_index = raw.applied
        self.listeners: list[Callable[[], None]] = []  # told after each Ready's applies

    def installed(self, index: int) -> None:
        """A leader's snapshot up to `index` replaced the state: the callers of entries
        it covers never learn their outcome."""
        self.applied_index = index
        self._proposals.fail_upto(index)

    def apply_all(self, entries: list[Entry], restored: bool = False) -> None:
        """Apply a Ready's committed entries (`restored`: it installed a snapshot)."""
        snaps = self._snaps
        if restored:
            snaps.log_bytes = 0
        for e in entries:
            self._apply(e)
            snaps.log_bytes += len(e.data)
        if entries:
            self.applied_index = entries[-1].index
            failpoints.hit("apply-before-answer")  # the answers go out once the loop runs
        if entries or restored:
            for listener in self.listeners:
                listener()

    def _apply(self, e: Entry) -> None:
        result: Answer | None = None
        if e.type is EntryType.CONF_CHANGE:
            cc = conf_change_of(e)
            failpoints.hit("membership-change")
            self._raw.apply_conf_change(cc)
            self._membership.apply(cc)
        elif e.data:
            time_ms, payload = split_entry_data(e.data)
            result = self._sm.apply(e.index, e.term, time_ms, payload)
        self._proposals.settle(e, result)
