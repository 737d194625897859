"""A big snapshot message crosses a peer connection in pieces: cut on the sending side
(`cut`, one piece per batch), put back together on the receiving one (`Reassembly`).
No message of hundreds of MiB to build and hold twice, and heartbeats interleave with
the pieces instead of queueing behind one huge write."""

from __future__ import annotations

import dataclasses

from coord.raft.types import Message, MessageType
from coord.server.transport.raft_proto import fill_message_pb
from coord.v1 import raft_pb2

__all__ = ["CHUNK_BYTES", "Piece", "Reassembly", "cut", "fill_piece", "needs_cutting"]

CHUNK_BYTES = 4 * 1024 * 1024
"""A snapshot message bigger than this goes as pieces of this size, one per batch."""


@dataclasses.dataclass(slots=True)
class Piece:
    """A queued piece of a snapshot message; `type` lets the queue's snapshot
    bookkeeping count it as the snapshot it is part of."""

    to: int
    offset: int
    total: int
    data: bytes
    message: Message | None  # on the last piece: the message, its snapshot data empty
    type: MessageType = MessageType.SNAP


def needs_cutting(m: Message) -> bool:
    """Is `m` (a SNAP message) too big to go whole?"""
    return m.snapshot is not None and len(m.snapshot.data) > CHUNK_BYTES


def cut(m: Message) -> list[Piece]:
    assert m.snapshot is not None
    data = m.snapshot.data
    bare = dataclasses.replace(m, snapshot=dataclasses.replace(m.snapshot, data=b""))
    starts = range(0, len(data), CHUNK_BYTES)
    return [Piece(m.to, i, len(data), data[i:i + CHUNK_BYTES],
                  bare if i == starts[-1] else None) for i in starts]


def fill_piece(c: Piece, batch: raft_pb2.MessageBatch) -> int:
    """Write `c` into `batch` (a batch of its own); return the messages it counts as."""
    chunk = batch.chunk
    chunk.offset, chunk.total, chunk.data = c.offset, c.total, c.data
    if c.message is not None:
        fill_message_pb(chunk.message, c.message)
    return 1


@dataclasses.dataclass(slots=True)
class Reassembly:
    """The pieces of a snapshot received so far on one connection."""

    parts: list[bytes] = dataclasses.field(default_factory=list)
    received: int = 0
