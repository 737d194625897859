"""The receiving half of the peer transport: what peers send this member, handed to its
receiver (the node).

Each batch a peer's connection brings (`connection.Inbound`) is decoded here and what
is for this member goes to the receiver in one call, synchronously on the event loop;
anything else (for another member, undecodable, local-only) is counted and dropped. A
snapshot arriving in pieces is kept in its sender's receipt (`snapshot_receipt`) until
its last piece makes it a snapshot file, which the message then carries. The sending
half, a queue and a connection per peer, is `peer.PeerTransport`'s, which holds one of
these.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable

from coord.raft.types import LOCAL_MESSAGES, Message
from coord.server.snapshot_file import SnapshotFile
from coord.server.transport.raft_proto import message_from_pb
from coord.server.transport.snapshot_receipt import Outcome, SnapshotReceipts
from coord.v1 import raft_pb2

__all__ = ["PeerInbox"]

log = logging.getLogger(__name__)


def _nowhere(_messages: list[Message]) -> None:
    """Where received messages go until the transport's `receive_with` names the receiver."""


class PeerInbox:
    """Batches from peers, decoded and handed to `on_messages`; a snapshot's pieces kept
    per sender, in `spool_dir` (`SnapshotReceipts`), until complete."""

    def __init__(self, node_id: int, spool_dir: str | os.PathLike[str] | None) -> None:
        self.node_id = node_id
        self.on_messages: Callable[[list[Message]], None] = _nowhere
        # what has arrived of a snapshot each peer is sending us, across its connections
        self.receipts = SnapshotReceipts(spool_dir)
        self.dropped = 0  # inbound messages not for us, undecodable, or local-only
        self.received: dict[int, int] = {}  # messages handed over, by sender

    def deliver(self, from_id: int, batch: raft_pb2.MessageBatch) -> None:
        """Decode a batch received from `from_id` and hand what is for us to the receiver;
        anything else (for another member, undecodable, local-only) is counted and dropped.
        A snapshot piece is kept in the sender's receipt until its message completes it."""
        if not batch.HasField("chunk"):
            self._hand_over(from_id, batch.messages)
            return
        chunk = batch.chunk
        outcome = self.receipts.add(from_id, chunk)
        if outcome is Outcome.COMPLETE:
            self._hand_over(from_id, [chunk.message], self.receipts.take(from_id))
        elif outcome is not Outcome.KEPT:
            self.dropped += 1
            log.warning("dropping a snapshot from %d (%s): piece at byte %d of %d",
                        from_id, outcome.value, chunk.offset, chunk.total)

    def _hand_over(self, from_id: int, messages: Iterable[raft_pb2.Message],
                   snapshot_data: SnapshotFile | None = None) -> None:
        me = self.node_id
        local = LOCAL_MESSAGES
        out: list[Message] = []
        for p in messages:
            if p.to != me:
                self.dropped += 1
                continue
            try:
                m = message_from_pb(p)
            except ValueError as exc:
                self.dropped += 1
                log.warning("dropping undecodable message from %d: %s", from_id, exc)
                continue
            if m.type in local:
                self.dropped += 1
                continue
            if snapshot_data is not None and m.snapshot is not None:
                m = dataclasses.replace(m, snapshot=dataclasses.replace(m.snapshot,
                                                                        data=snapshot_data))
            out.append(m)
        if snapshot_data is not None and not any(m.snapshot is not None for m in out):
            snapshot_data.remove()  # its message was dropped: nothing will store the file
        if not out:
            return
        self.received[from_id] = self.received.get(from_id, 0) + len(out)
        try:
            self.on_messages(out)
        except Exception:
            log.exception("on_messages failed for a batch from %d", from_id)

    def forget(self, from_id: int) -> None:
        """Drop what `from_id` sent (it left the cluster): its receipt, on disk too."""
        self.receipts.drop(from_id)
        self.received.pop(from_id, None)

    def close(self) -> None:
        """Let go of every spool file (named ones stay for the next run)."""
        self.receipts.close()
