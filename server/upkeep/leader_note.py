"""A leader names itself in the log as soon as it is elected.

The raft log holds terms, not who led them; the history export (and its audit) needs
both, so each leader proposes `NoteLeader(member, term)` once per term it leads. It is
proposed the moment this member sees itself elected, so it lands right behind the term's
no-op and commits with it: a member stopped a moment after an election still has its
term's leader in its log (the export's rows before a term's note carry no leader).

The note moves no revision and changes nothing but `CoordMachine.leader_note`, so a note
written twice (a retry after an outcome that was unknown) is harmless: one term, one
leader either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from coord.raft import Role
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.upkeep.periodic import Background
from coord.sm.commands import NoteLeader

log = logging.getLogger(__name__)

ATTEMPTS = 5
RETRY_S = 0.2


class LeaderNote:
    """Follows this member's status events; proposes the note for each term it leads."""

    def __init__(self, node: Node, propose: Callable[[NoteLeader], Awaitable[Any]]) -> None:
        self.node = node
        self.propose = propose
        self.noted_term = 0  # the latest term this member named itself in
        self._task = Background("leader-note", self._follow)

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _follow(self) -> None:
        async for event in self.node.events():
            if event.role is Role.LEADER and event.term > self.noted_term:
                await self.note(event.term)

    def _leads(self, term: int) -> bool:
        return self.node.is_leader and self.node.term == term

    async def note(self, term: int) -> None:
        """Propose the note for `term` while this member still leads it (a few tries)."""
        name = self.node.me.name
        for attempt in range(1, ATTEMPTS + 1):
            if not self._leads(term):
                return  # a newer term's leader names itself
            try:
                await self.propose(NoteLeader(name, term))
                self.noted_term = term
                return
            except NodeError as exc:
                if attempt == ATTEMPTS or not self._leads(term):
                    log.warning("%s: leader note for term %d not committed: %s", name, term, exc)
                    return
                await asyncio.sleep(RETRY_S)
            except Exception:  # anything else: this term goes unnamed, the next ones not
                log.exception("%s: leader note for term %d failed", name, term)
                return
