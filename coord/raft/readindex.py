"""ReadIndex: a leader serves a linearizable read at its commit index once a quorum
confirms, by acknowledging a heartbeat that carries the request's context, that it is
still the leader."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from .types import Message


@dataclass(slots=True)
class PendingRead:
    request: Message
    index: int
    acks: set[int] = field(default_factory=set)


class ReadIndexQueue:
    def __init__(self) -> None:
        self._pending: OrderedDict[bytes, PendingRead] = OrderedDict()

    def add(self, index: int, request: Message, self_id: int) -> None:
        if request.context not in self._pending:
            self._pending[request.context] = PendingRead(request, index, {self_id})

    def ack(self, node: int, context: bytes) -> set[int] | None:
        pending = self._pending.get(context)
        if pending is None:
            return None
        pending.acks.add(node)
        return pending.acks

    def release(self, context: bytes) -> list[PendingRead]:
        """Everything queued up to and including `context`: a quorum ack for a later
        request also confirms leadership for the earlier ones."""
        if context not in self._pending:
            return []
        released = []
        while self._pending:
            ctx, pending = self._pending.popitem(last=False)
            released.append(pending)
            if ctx == context:
                break
        return released

    def last_context(self) -> bytes | None:
        return next(reversed(self._pending), None) if self._pending else None

    def clear(self) -> None:
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)
