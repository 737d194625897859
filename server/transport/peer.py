"""Peer-to-peer Raft transport: one TCP connection to each peer, TLS with peer TLS
(`coord.server.transport.connection`), carrying frames (`coord.server.transport.frames`).

Outbound: every peer has one bounded queue and one asyncio task that owns one connection
to it. The task drains everything queued into ONE ``MessageBatch`` per frame (a big
snapshot in pieces, `snapshot_pieces`) and waits while the connection's write buffer is
over its limit. When the queue is full, or while the peer is not connected, new
messages are dropped (Raft tolerates loss) and the owner is told via ``on_unreachable``
(at most once per 100 ms per peer). A broken connection is re-opened with capped
exponential backoff (50 ms .. 1 s), cut short when the peer opens a connection to us: a
restarted peer is reached at once, not after the backoff it grew while it was down.

Inbound: the member's peer port (`coord.server.transport.listener`) hands each Raft
connection to `PeerTransport.accept`; each batch it brings goes to the transport's
`inbox` (`peer_inbox`: the receiving half), which hands what is for us to
``on_messages`` synchronously in the event loop.

Not gRPC, as the member's other calls are: frames.py says why. Everything runs on the
caller's event loop; there are no threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import ssl
from collections import deque
from collections.abc import Callable, Iterable

from coord.raft.types import LOCAL_MESSAGES, Message, MessageType
from coord.server import failpoints
from coord.server.transport import snapshot_pieces
from coord.server.transport.auth import PeerAuth
from coord.server.transport.connection import ConnectionEnded, Inbound, Outbound
from coord.server.transport.peer_inbox import PeerInbox
from coord.server.transport.raft_proto import fill_message_pb
from coord.server.transport.snapshot_pieces import Piece, fill_piece
from coord.v1 import raft_pb2

__all__ = ["MAX_MESSAGE_BYTES", "PeerTransport"]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest batch the transport sends (a larger single message is dropped and reported)."""

BATCH_SOFT_BYTES = 32 * 1024 * 1024
"""A batch stops growing once it would pass this size (a single larger message still goes)."""
BACKOFF_MIN = 0.05
BACKOFF_MAX = 1.0
HANDSHAKE_TIMEOUT = 5.0
"""How long opening a connection (connect + the peer accepting our credentials) may take."""
UNREACHABLE_INTERVAL = 0.1
"""``on_unreachable`` is called at most once per this many seconds per peer."""

_AUTH_CODES = ("UNAUTHENTICATED", "PERMISSION_DENIED", "TLS")
_SNAP = MessageType.SNAP


def _log_task_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s died", task.get_name(), exc_info=task.exception())


@dataclasses.dataclass(slots=True, eq=False)
class _Peer:
    node_id: int
    address: str
    generation: int = 0  # bumped whenever the owning task is replaced or stopped
    task: asyncio.Task[None] | None = None
    queue: deque[Message | Piece] = dataclasses.field(default_factory=deque)
    link: Outbound | None = None  # the open connection, while the pump runs it
    wakeup: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # the peer opened a stream to us: stop backing off
    came_back: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    connected: bool = False
    sent: int = 0  # messages written to the stream
    dropped: int = 0  # messages dropped (queue full, not connected, stream broke)
    batches: int = 0  # stream writes
    connects: int = 0  # streams accepted by the peer
    failures: int = 0  # failed or broken streams
    auth_failures: int = 0  # streams refused with UNAUTHENTICATED / PERMISSION_DENIED
    last_error: str | None = None
    lost_snapshot: bool = False  # a snapshot went down with the last stream


class PeerTransport:
    """Sends Raft messages to peers and delivers the ones received from them (to the
    receiver named by `receive_with`: the node, which is built after its transport).

    ``send``, ``set_peer`` and ``remove_peer`` must be called from the event loop thread,
    ``set_peer`` from inside a running loop (it starts the peer's task).
    """

    def __init__(self, auth: PeerAuth, queue_limit: int = 4096,
                 tls: ssl.SSLContext | None = None,
                 spool_dir: str | os.PathLike[str] | None = None) -> None:
        """`tls`: open connections over TLS with this context (the peer port's opening
        end: `coord.tls.credentials.client_context`). `spool_dir`: where a snapshot
        arriving in pieces is written (`PeerInbox`), and its file stays once
        complete: the member's snapshot dir (None: a temporary dir of this transport's,
        removed when it closes)."""
        if queue_limit <= 0:
            raise ValueError("queue_limit must be positive")
        self.auth = auth
        self.tls = tls
        self.spool_dir = spool_dir
        self.node_id = auth.node_id
        self._on_unreachable: Callable[[int], None] = lambda _id: None
        self._queue_limit = queue_limit
        self._peers: dict[int, _Peer] = {}
        self._last_unreachable: dict[int, float] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._inbound: set[Inbound] = set()
        self.inbox = PeerInbox(self.node_id, spool_dir)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        # Counters that belong to no configured peer.
        self.dropped_unknown = 0  # outbound messages for a node that is not a peer

    # --- configuration ------------------------------------------------------------------

    def receive_with(
        self,
        on_messages: Callable[[list[Message]], None],
        on_unreachable: Callable[[int], None] = lambda _id: None,
    ) -> None:
        """Deliver received messages to `on_messages` (synchronously, on the loop) and
        report peers that cannot be reached to `on_unreachable`."""
        self.inbox.on_messages = on_messages
        self._on_unreachable = on_unreachable

    @property
    def closed(self) -> bool:
        return self._closed

    def set_peer(self, node_id: int, address: str) -> None:
        """Send to `node_id` at "host:port". A new address drops the old stream and queue and
        reconnects. Our own id is ignored."""
        if self._closed:
            raise RuntimeError("transport is closed")
        if node_id == self.node_id:
            return
        loop = self._loop = asyncio.get_running_loop()
        peer = self._peers.get(node_id)
        if peer is None:
            peer = self._peers[node_id] = _Peer(node_id, address)
        elif peer.address == address and peer.task is not None:
            return
        else:
            self._stop_peer(peer)
            peer.address = address
        peer.task = loop.create_task(
            self._run_peer(peer, address, peer.generation),
            name=f"coord-transport-{self.node_id}->{node_id}",
        )
        peer.task.add_done_callback(_log_task_failure)

    def remove_peer(self, node_id: int) -> None:
        peer = self._peers.pop(node_id, None)
        self._last_unreachable.pop(node_id, None)
        self.inbox.forget(node_id)
        if peer is not None:
            self._stop_peer(peer)

    def _stop_peer(self, peer: _Peer) -> None:
        peer.generation += 1
        peer.connected = False
        if peer.queue:
            peer.dropped += len(peer.queue)
            peer.queue.clear()
        task, peer.task = peer.task, None
        if task is not None and not task.done():
            task.cancel()
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    async def close(self) -> None:
        """Stop all outbound streams and wait for them to finish. Inbound streams still open
        are refused from now on (the owner stops the server)."""
        if self._closed:
            return
        self._closed = True
        for peer in self._peers.values():
            self._stop_peer(peer)
        for conn in list(self._inbound):
            conn.refuse("UNAVAILABLE", "transport closed")
        self.inbox.close()
        tasks = list(self._retired)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- sending ------------------------------------------------------------------------

    def send(self, messages: Iterable[Message], at_once: bool = False) -> None:
        """Send `messages` to their peers (``Message.to``). Never blocks; drops what cannot
        be queued and reports the peer unreachable.

        The peer's pump writes them, in a later loop turn, with whatever else was queued
        by then. `at_once`: a peer with nothing queued whose connection takes writes gets
        its batch written here, now; the rest (a backlog, a snapshot's pieces, a
        connection paused or not yet open) still goes to the pump. For a leader about to
        hand its own write of the same entries to the storage thread: that thread waits
        for the GIL while this loop runs, so left to the pump the encoding and writing
        came first and the fsync started ~0.3 ms after it was handed over, on one
        client's put's critical path. The driver says which messages go at once
        (`driver._waited_on`); everything at once cost puts from 16 and 64 clients
        10-20 %, as commit broadcasts stopped sharing a write with the next append.
        Only what `send` queued behind an empty queue is written here, and a queue
        that was not empty already has its pump woken."""
        if self._closed:
            return
        peers = self._peers
        limit = self._queue_limit
        local = LOCAL_MESSAGES
        touched: list[_Peer] = []
        for m in messages:
            peer = peers.get(m.to)
            if peer is None:
                self.dropped_unknown += 1
                self._report_unreachable(m.to, m.type is _SNAP)
                continue
            if m.type in local:
                log.warning("not sending local message %s to %d", m.type.name, m.to)
                peer.dropped += 1
                continue
            queue = peer.queue
            if not peer.connected or len(queue) >= limit:
                peer.dropped += 1
                self._report_unreachable(m.to, m.type is _SNAP)
                continue
            if not queue:
                touched.append(peer)
            queue.append(m)
        for peer in touched:
            link = peer.link
            if at_once and link is not None and not link.paused and link.ended is None:
                self._write_batch(peer, link)
            if peer.queue and not peer.wakeup.is_set():
                peer.wakeup.set()

    def _report_unreachable(self, node_id: int, force: bool = False) -> None:
        """Tell the owner, at most once per UNREACHABLE_INTERVAL unless `force` (a dropped
        snapshot is always reported: the leader would otherwise wait for it)."""
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        now = loop.time()
        last = self._last_unreachable.get(node_id, -math.inf)
        if now - last < UNREACHABLE_INTERVAL and not force:
            return
        self._last_unreachable[node_id] = now
        # Deferred: the caller may be in the middle of handling a Ready when send() drops.
        loop.call_soon(self._fire_unreachable, node_id)

    def _fire_unreachable(self, node_id: int) -> None:
        if self._closed:
            return
        try:
            self._on_unreachable(node_id)
        except Exception:
            log.exception("on_unreachable(%d) failed", node_id)

    # --- the per-peer task --------------------------------------------------------------

    async def _run_peer(self, peer: _Peer, address: str, generation: int) -> None:
        to_id = peer.node_id
        backoff = BACKOFF_MIN
        while True:
            peer.came_back.clear()
            link: Outbound | None = None
            try:
                link = await asyncio.wait_for(
                    Outbound.open(self.auth, to_id, address, peer.wakeup, self.tls),
                    HANDSHAKE_TIMEOUT)
                if peer.generation != generation:
                    return
                backoff = BACKOFF_MIN
                peer.connected = True
                peer.connects += 1
                peer.last_error = None
                log.debug("connection %d->%d (%s) open", self.node_id, to_id, address)
                peer.link = link
                await self._pump(peer, link)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if peer.generation != generation:
                    return
                self._note_failure(peer, exc)
            finally:
                if peer.link is link:
                    peer.link = None
                if link is not None:
                    if link.unsent_snapshot():
                        peer.lost_snapshot = True
                    link.close()
                if peer.generation == generation:
                    self._disconnected(peer)
            try:
                await asyncio.wait_for(peer.came_back.wait(), backoff)
            except TimeoutError:
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            backoff = BACKOFF_MIN

    async def _pump(self, peer: _Peer, link: Outbound) -> None:
        queue = peer.queue
        wakeup = peer.wakeup
        while True:
            if link.ended is not None:
                raise link.ended
            if not queue:
                wakeup.clear()
                await wakeup.wait()
                continue
            if link.paused:
                await link.drained()
                continue
            self._write_batch(peer, link)

    def _write_batch(self, peer: _Peer, link: Outbound) -> None:
        """Write the next batch of `peer`'s queue to `link`: the pump's step, and `send`'s."""
        batch = raft_pb2.MessageBatch()
        n, snapshot = self._fill_batch(peer, batch, link)
        if n:
            link.send(batch.SerializeToString(), snapshot)
            peer.sent += n
            peer.batches += 1
            if snapshot:
                failpoints.hit("snapshot-send")

    def _fill_batch(self, peer: _Peer, batch: raft_pb2.MessageBatch,
                    link: Outbound) -> tuple[int, bool]:
        """Move queued messages into `batch` (up to BATCH_SOFT_BYTES); return how many,
        and whether the batch carries (part of) a snapshot. A snapshot cut into pieces
        starts where the peer said it holds it up to when `link` opened (once)."""
        queue = peer.queue
        msgs = batch.messages
        add = msgs.add
        n = 0
        size = 0
        snapshot = False
        while queue:
            m = queue[0]
            if type(m) is Piece or (m.type is _SNAP and snapshot_pieces.needs_cutting(m)):
                if n:
                    break  # a piece goes in a batch of its own
                if type(m) is not Piece:
                    queue.popleft()
                    held, link.held = link.held, None
                    try:
                        queue.extendleft(reversed(snapshot_pieces.cut(m, held)))
                    except OSError as exc:  # its file went: a newer snapshot replaced it
                        peer.dropped += 1
                        log.warning("dropping a snapshot to %d: %s", m.to, exc)
                        self._report_unreachable(m.to, True)
                        continue
                piece = queue.popleft()
                try:
                    return fill_piece(piece, batch), True
                except OSError as exc:  # its file is short or damaged: none of the rest goes
                    while queue and type(queue[0]) is Piece and queue[0].transfer is \
                            piece.transfer:
                        queue.popleft()
                    peer.dropped += 1
                    log.warning("dropping a snapshot to %d: %s", piece.to, exc)
                    self._report_unreachable(piece.to, True)
                    continue
            queue.popleft()
            x = add()
            fill_message_pb(x, m)
            s = x.ByteSize() + 8
            if s > MAX_MESSAGE_BYTES - 1024:
                del msgs[-1]
                peer.dropped += 1
                log.error("dropping %s to %d: %d bytes is too large", m.type.name, m.to, s)
                self._report_unreachable(m.to, True)
                continue
            if n and size + s > BATCH_SOFT_BYTES:
                del msgs[-1]
                queue.appendleft(m)
                break
            size += s
            n += 1
            snapshot = snapshot or m.type is _SNAP
        return n, snapshot

    def _note_failure(self, peer: _Peer, exc: Exception) -> None:
        details: str | None = None
        if isinstance(exc, ConnectionEnded):
            error, details = exc.code, exc.details
        elif isinstance(exc, TimeoutError):
            error = "TIMEOUT"
        elif isinstance(exc, ssl.SSLError):  # its certificate is not one we trust
            error = "TLS"
        elif isinstance(exc, OSError):  # refused, reset, unreachable
            error = "UNAVAILABLE"
        else:
            error = type(exc).__name__
        peer.failures += 1
        if error in _AUTH_CODES:
            peer.auth_failures += 1
        # Log each kind of failure once per outage, not on every retry.
        level = logging.WARNING if error != peer.last_error else logging.DEBUG
        peer.last_error = error
        log.log(
            level,
            "connection %d->%d (%s) failed: %s %s",
            self.node_id,
            peer.node_id,
            peer.address,
            error,
            details or exc,
        )

    def _disconnected(self, peer: _Peer) -> None:
        peer.connected = False
        lost_snapshot, peer.lost_snapshot = peer.lost_snapshot, False
        if peer.queue:
            peer.dropped += len(peer.queue)
            lost_snapshot = lost_snapshot or any(m.type is _SNAP for m in peer.queue)
            peer.queue.clear()
        if not self._closed:
            self._report_unreachable(peer.node_id, lost_snapshot)

    # --- introspection ------------------------------------------------------------------

    def stats(self) -> dict[int, dict]:
        return {
            node_id: {
                "address": p.address,
                "connected": p.connected,
                "queued": len(p.queue),
                "sent": p.sent,
                "dropped": p.dropped,
                "batches": p.batches,
                "connects": p.connects,
                "failures": p.failures,
                "auth_failures": p.auth_failures,
                "received": self.inbox.received.get(node_id, 0),
                "last_error": p.last_error,
            }
            for node_id, p in self._peers.items()
        }

    # --- inbound ------------------------------------------------------------------------

    def accept(self, tr: asyncio.Transport) -> Inbound:
        """Serve a Raft connection a peer opened to us (the peer port's; see
        `listener.PeerPort`); feed it what arrives."""
        conn = Inbound(self, tr, self._inbound.discard)
        if self._closed:
            conn.refuse("UNAVAILABLE", "transport closed")
        else:
            self._inbound.add(conn)
        return conn

    def peer_came_back(self, from_id: int) -> None:
        """`from_id` opened a stream to us: if ours to it is down, reconnect now rather
        than after the backoff it grew while the peer was away."""
        back = self._peers.get(from_id)
        if back is not None and not back.connected:
            back.came_back.set()
