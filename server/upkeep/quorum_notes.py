"""Recording, in the log, the periods a member spent without a quorum.

The log holds what committed, not when nothing could: an audit that checks "no session
expired while no quorum existed" needs those periods written down. A member learns of
one when its mode changes (`ModeMonitor`'s listeners): it notes when the quorum went
(the Raft signal, before the grace period) and, once read-write again, proposes
`NoteQuorumLost(member, since_ms, until_ms, mode)` through the coordinator — forwarded
to the leader, which stamps the entry with its own clock; apply reads no clock.

A member cut off alone (a minority) lost its quorum while the majority kept one and may
have gone on committing — expiring sessions legitimately, without the restart of every
TTL a regained quorum brings: that is no period without a quorum, and noting it would
make the audit flag those expiries. A leader that lost its quorum steps down (CheckQuorum),
so a period without any quorum always ends with a new term. Hence, once back:
  - the term is the one it lost its quorum in: a leader kept its quorum; nothing noted;
  - else the first entry stamped after the loss began (waited for a little: the new
    leader names itself at election) decides: of the old term, the old leader still
    committed after the loss began, nothing noted; of a newer term, the period ends just
    before it (`until_ms`), or when this member came back if that is earlier. The new
    leader restarted every session's TTL when it took over, at or after that entry.
The times are wall clocks (ms) of the member and the leader(s), on one host or on
synchronised hosts as the audit assumes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from coord.raft import Entry, EntryType
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError, OutcomeUnknown, ProposalLost, Timeout
from coord.server.storage.log_format import split_entry_data
from coord.server.upkeep.mode import READ_WRITE, ModeChange
from coord.sm.commands import NoteQuorumLost

log = logging.getLogger(__name__)

SCAN_PAGE = 256
SCAN_ENTRIES = 10_000  # look this far past the loss for the first entry stamped after it
WAIT_S = 5.0  # for the new leader's first stamped entry
POLL_S = 0.1
ATTEMPTS = 5
RETRY_S = 0.5
UNCERTAIN = (OutcomeUnknown, ProposalLost, Timeout)  # may have been applied


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def first_stamped(entries: Sequence[Entry], since_ms: int) -> Entry | None:
    """The first command entry stamped by its leader at or after `since_ms`."""
    for e in entries:
        if e.type is EntryType.NORMAL and e.data and split_entry_data(e.data)[0] >= since_ms:
            return e
    return None


@dataclass(frozen=True, slots=True)
class Lost:
    """What a member knew when it went read-only (or no-quorum)."""

    since_ms: int  # when the quorum went (the Raft signal, before the grace period)
    commit: int
    term: int
    mode: str


class QuorumNotes:
    """A mode listener that proposes a note for each period without a quorum."""

    def __init__(self, node: Node, entries: Callable[[int, int], Sequence[Entry]],
                 propose: Callable[[NoteQuorumLost], Awaitable[Any]]) -> None:
        self.node = node
        self.entries = entries  # the store's entries(lo, hi): read on a thread
        self.propose = propose
        self._lost: Lost | None = None
        self._tasks: set[asyncio.Task] = set()

    def changed(self, change: ModeChange) -> None:
        if change.mode != READ_WRITE:
            if self._lost is None:
                since = _now_ms() - int(self.node.quorum_lost_for() * 1000)
                self._lost = Lost(since, self.node.status().commit, self.node.term,
                                  change.mode)
            return
        if self._lost is None:
            return
        lost, self._lost = self._lost, None
        task = asyncio.get_running_loop().create_task(self._note(lost, _now_ms()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def period(self, lost: Lost, back_ms: int) -> tuple[int | None, str]:
        """(until_ms, why) for a period that began with `lost` and ended, as far as this
        member saw, at `back_ms`; until_ms None: nothing to note (why says so)."""
        if self.node.term == lost.term:
            return None, f"still term {lost.term}: its leader kept a quorum"
        lo, deadline = lost.commit + 1, time.monotonic() + WAIT_S
        while lo <= lost.commit + SCAN_ENTRIES:
            hi = min(lo + SCAN_PAGE, self.node.applied_index + 1)
            if lo >= hi:
                if time.monotonic() >= deadline:
                    return None, f"no entry stamped after it within {WAIT_S:.0f}s"
                await asyncio.sleep(POLL_S)
                continue
            page = await asyncio.to_thread(self.entries, lo, hi)
            if not page or page[0].index != lo:
                return None, "the log past it was compacted: whether a quorum existed is unknown"
            first = first_stamped(page, lost.since_ms)
            if first is not None:
                if first.term == lost.term:
                    return None, f"term {lost.term}'s leader committed entry {first.index} after it"
                return min(back_ms, split_entry_data(first.data)[0] - 1), ""
            lo = hi
        return None, f"no entry stamped after it in the next {SCAN_ENTRIES} entries"

    async def _note(self, lost: Lost, back_ms: int) -> None:
        name = self.node.me.name
        try:
            until, why = await self.period(lost, back_ms)
        except Exception as exc:  # the store closed under us (stopping): nothing to note
            log.warning("%s: quorum-loss period not noted: %s", name, exc)
            return
        if until is None or until < lost.since_ms:
            log.info("%s: cut off from %d, not noted as a period without a quorum: %s", name,
                     lost.since_ms, why or "the next leader committed at once")
            return
        note = NoteQuorumLost(name, lost.since_ms, until, lost.mode)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await self.propose(note)
                log.info("%s: noted %s without a quorum, %d..%d (%.1fs)", name, lost.mode,
                         lost.since_ms, until, (until - lost.since_ms) / 1000)
                return
            except UNCERTAIN as exc:  # the note carries no request id: retrying could
                log.warning("%s: quorum-loss note %d..%d may not be committed: %s", name,
                            lost.since_ms, until, exc)  # write it twice
                return
            except NodeError as exc:
                if attempt == ATTEMPTS:
                    log.warning("%s: quorum-loss note %d..%d not committed: %s", name,
                                lost.since_ms, until, exc)
                    return
                await asyncio.sleep(RETRY_S)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
