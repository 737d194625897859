"""Peer-to-peer Raft transport over gRPC asyncio (service ``coord.v1.RaftTransport``).

Outbound: every peer has one bounded queue and one asyncio task that owns one client stream
(``Stream(stream MessageBatch) returns (StreamAck)``) to it. The task drains everything queued
into ONE ``MessageBatch`` per write and awaits the write before taking the next batch, so a
slow peer pushes back through HTTP/2 flow control into the queue; when the queue is full,
or while the peer is not connected, new messages are dropped (Raft tolerates loss) and the
owner is told via ``on_unreachable`` (at most once per 100 ms per peer). A broken stream is
re-opened with capped exponential backoff (50 ms .. 1 s), cut short (on a fresh channel) when
the peer opens a stream to us: a restarted peer is reached at once, not after the backoff
it grew while it was down. gRPC keepalive notices dead peers.

Inbound: the servicer authenticates each stream from its metadata, then decodes each batch
and hands the messages to ``on_messages`` synchronously in the event loop.

Authentication: every stream carries the member's credentials (`auth.PeerAuth`: the
sender, the cluster and an HMAC under the cluster secret); a stream that fails the check is
refused. Once accepted, the server sends initial metadata ``coord-accepted``; the client
only counts a peer as connected after seeing it. Only protobuf crosses the wire.

Everything runs on the caller's event loop; there are no threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable

import grpc

from coord.raft.types import LOCAL_MESSAGES, Message, MessageType
from coord.server.transport.auth import PeerAuth
from coord.server.transport.codec import fill_message_pb, message_from_pb
from coord.v1 import raft_pb2, raft_pb2_grpc

__all__ = ["CHANNEL_OPTIONS", "EXCLUSIVE_BIND", "SERVER_OPTIONS", "PeerTransport"]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest gRPC message either side will send or accept."""

BATCH_SOFT_BYTES = 32 * 1024 * 1024
CHUNK_BYTES = 4 * 1024 * 1024
"""A snapshot message bigger than this goes as pieces of this size, one per batch: no
message of hundreds of MiB to build, hold twice and push through gRPC in one piece, and
heartbeats interleave with the pieces instead of queueing behind one huge write."""
"""A batch stops growing once it would pass this size (a single larger message still goes)."""

BACKOFF_MIN = 0.05
BACKOFF_MAX = 1.0
HANDSHAKE_TIMEOUT = 5.0
"""How long opening a stream (connect + the peer accepting our credentials) may take."""

UNREACHABLE_INTERVAL = 0.1
"""``on_unreachable`` is called at most once per this many seconds per peer."""

MD_ACCEPTED = "coord-accepted"

_KEEPALIVE_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 1000),
    # With grpcio 1.85 an unanswered keepalive ping fails the connection only after this
    # (default 1 min), whatever keepalive_timeout_ms says.
    ("grpc.http2.ping_timeout_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Keep pinging an idle stream (the default stops after 2 pings without data).
    ("grpc.http2.max_pings_without_data", 0),
]

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    *_KEEPALIVE_OPTIONS,
    # gRPC's own reconnect backoff defaults to 1 s .. 120 s; keep it within ours.
    ("grpc.initial_reconnect_backoff_ms", int(BACKOFF_MIN * 1000)),
    ("grpc.min_reconnect_backoff_ms", int(BACKOFF_MIN * 1000)),
    ("grpc.max_reconnect_backoff_ms", int(BACKOFF_MAX * 1000)),
    ("grpc.enable_retries", 0),
    # One connection per peer channel, closed with it (not shared process-wide).
    ("grpc.use_local_subchannel_pool", 1),
]
"""Options of the outbound channel to each peer."""

EXCLUSIVE_BIND = ("grpc.so_reuseport", 0)
"""gRPC servers set SO_REUSEPORT by default, so a second server on a port already served
binds without error and the kernel splits connections between the two. Every coord server
binds exclusively: a taken port is a start-up error, not a member answering for another."""

SERVER_OPTIONS: list[tuple[str, int]] = [
    EXCLUSIVE_BIND,
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    *_KEEPALIVE_OPTIONS,
    # Accept the peers' keepalive pings (every 2 s, also without calls) without GOAWAY.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
]
"""Options for the member's peer ``grpc.aio.server`` (``grpc.aio.server(options=...)``)."""

_AUTH_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
_SNAP = MessageType.SNAP


def _log_task_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s died", task.get_name(), exc_info=task.exception())


class _StreamEnded(Exception):
    """The peer finished the stream (e.g. refused our credentials, or is shutting down)."""

    def __init__(self, code: grpc.StatusCode, details: str | None) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


@dataclasses.dataclass(slots=True)
class _Chunk:
    """A queued piece of a snapshot message (see CHUNK_BYTES); `type` lets the queue's
    snapshot bookkeeping count it as the snapshot it is part of."""

    to: int
    offset: int
    total: int
    data: bytes
    message: Message | None  # on the last piece: the message, its snapshot data empty
    type: MessageType = MessageType.SNAP


def _chunks(m: Message) -> list[_Chunk]:
    assert m.snapshot is not None
    data = m.snapshot.data
    bare = dataclasses.replace(m, snapshot=dataclasses.replace(m.snapshot, data=b""))
    starts = range(0, len(data), CHUNK_BYTES)
    return [_Chunk(m.to, i, len(data), data[i:i + CHUNK_BYTES],
                   bare if i == starts[-1] else None) for i in starts]


class _Peer:
    __slots__ = (
        "node_id",
        "address",
        "generation",
        "task",
        "queue",
        "wakeup",
        "came_back",
        "connected",
        "sent",
        "dropped",
        "batches",
        "connects",
        "failures",
        "auth_failures",
        "received",
        "last_error",
        "lost_snapshot",
    )

    def __init__(self, node_id: int, address: str) -> None:
        self.node_id = node_id
        self.address = address
        self.generation = 0  # bumped whenever the owning task is replaced or stopped
        self.task: asyncio.Task[None] | None = None
        self.queue: deque[Message | _Chunk] = deque()
        self.wakeup = asyncio.Event()
        self.came_back = asyncio.Event()  # the peer opened a stream to us: stop backing off
        self.connected = False
        self.sent = 0  # messages written to the stream
        self.dropped = 0  # messages dropped (queue full, not connected, stream broke)
        self.batches = 0  # stream writes
        self.connects = 0  # streams accepted by the peer
        self.failures = 0  # failed or broken streams
        self.auth_failures = 0  # streams refused with UNAUTHENTICATED / PERMISSION_DENIED
        self.received = 0  # messages accepted from this peer (inbound)
        self.last_error: str | None = None
        self.lost_snapshot = False  # a snapshot went down with the last stream


def _nowhere(_messages: list[Message]) -> None:
    """Where received messages go until `receive_with` names the receiver."""


class PeerTransport:
    """Sends Raft messages to peers and delivers the ones received from them (to the
    receiver named by `receive_with`: the node, which is built after its transport).

    ``send``, ``set_peer`` and ``remove_peer`` must be called from the event loop thread,
    ``set_peer`` from inside a running loop (it starts the peer's task).
    """

    def __init__(self, auth: PeerAuth, queue_limit: int = 4096) -> None:
        if queue_limit <= 0:
            raise ValueError("queue_limit must be positive")
        self.auth = auth
        self.node_id = auth.node_id
        self._on_messages: Callable[[list[Message]], None] = _nowhere
        self._on_unreachable: Callable[[int], None] = lambda _id: None
        self._queue_limit = queue_limit
        self._peers: dict[int, _Peer] = {}
        self._last_unreachable: dict[int, float] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        # Counters that belong to no configured peer.
        self.dropped_unknown = 0  # outbound messages for a node that is not a peer
        self.dropped_inbound = 0  # inbound messages not for us, undecodable, or local-only

    # --- configuration ------------------------------------------------------------------

    def receive_with(
        self,
        on_messages: Callable[[list[Message]], None],
        on_unreachable: Callable[[int], None] = lambda _id: None,
    ) -> None:
        """Deliver received messages to `on_messages` (synchronously, on the loop) and
        report peers that cannot be reached to `on_unreachable`."""
        self._on_messages = on_messages
        self._on_unreachable = on_unreachable

    @property
    def closed(self) -> bool:
        return self._closed

    def register(self, server: grpc.aio.Server) -> None:
        """Add the RaftTransport servicer to the member's peer server (built with
        ``options=SERVER_OPTIONS``)."""
        raft_pb2_grpc.add_RaftTransportServicer_to_server(_Servicer(self), server)

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
        tasks = list(self._retired)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- sending ------------------------------------------------------------------------

    def send(self, messages: Iterable[Message]) -> None:
        """Queue `messages` for their peers (``Message.to``). Never blocks; drops what cannot
        be queued and reports the peer unreachable."""
        if self._closed:
            return
        peers = self._peers
        limit = self._queue_limit
        local = LOCAL_MESSAGES
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
            queue.append(m)
            wakeup = peer.wakeup
            if not wakeup.is_set():
                wakeup.set()

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
        metadata = self.auth.metadata_for(to_id)
        channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        open_stream = raft_pb2_grpc.RaftTransportStub(channel).Stream
        backoff = BACKOFF_MIN
        try:
            while True:
                peer.came_back.clear()
                call = open_stream(metadata=metadata, wait_for_ready=False)
                try:
                    await asyncio.wait_for(self._handshake(call), HANDSHAKE_TIMEOUT)
                    if peer.generation != generation:
                        return
                    backoff = BACKOFF_MIN
                    peer.connected = True
                    peer.connects += 1
                    peer.last_error = None
                    log.debug("stream %d->%d (%s) open", self.node_id, to_id, address)
                    await self._pump(peer, call)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if peer.generation != generation:
                        return
                    await self._note_failure(peer, call, exc)
                finally:
                    call.cancel()
                    if peer.generation == generation:
                        self._disconnected(peer)
                try:
                    await asyncio.wait_for(peer.came_back.wait(), backoff)
                except TimeoutError:
                    backoff = min(backoff * 2, BACKOFF_MAX)
                    continue
                # The channel may sit in gRPC's own reconnect backoff: start a fresh one.
                await channel.close()
                channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
                open_stream = raft_pb2_grpc.RaftTransportStub(channel).Stream
                backoff = BACKOFF_MIN
        finally:
            await channel.close()

    @staticmethod
    async def _handshake(call: grpc.aio.StreamUnaryCall) -> None:
        md = await call.initial_metadata()
        if md is not None and any(k == MD_ACCEPTED for k, _ in md):
            return
        # Trailers-only answer: the peer refused the stream.
        code = await call.code()
        raise _StreamEnded(code, await call.details())

    async def _pump(self, peer: _Peer, call: grpc.aio.StreamUnaryCall) -> None:
        queue = peer.queue
        wakeup = peer.wakeup
        call.add_done_callback(lambda _call: wakeup.set())
        batch_cls = raft_pb2.MessageBatch
        while True:
            if call.done():
                raise _StreamEnded(await call.code(), await call.details())
            if not queue:
                wakeup.clear()
                await wakeup.wait()
                continue
            batch = batch_cls()
            n = self._fill_batch(peer, batch)
            if n:
                try:
                    await call.write(batch)
                except BaseException:
                    # Maybe delivered, maybe not: count it lost, and remember a snapshot in it.
                    peer.dropped += n
                    if batch.HasField("chunk") or any(x.type == _SNAP for x in batch.messages):
                        peer.lost_snapshot = True
                    raise
                peer.sent += n
                peer.batches += 1

    def _fill_batch(self, peer: _Peer, batch: raft_pb2.MessageBatch) -> int:
        """Move queued messages into `batch` (up to BATCH_SOFT_BYTES); return how many."""
        queue = peer.queue
        msgs = batch.messages
        add = msgs.add
        n = 0
        size = 0
        while queue:
            m = queue[0]
            if type(m) is _Chunk or (m.type is _SNAP and m.snapshot is not None
                                     and len(m.snapshot.data) > CHUNK_BYTES):
                if n:
                    break  # a piece goes in a batch of its own
                if type(m) is not _Chunk:
                    queue.popleft()
                    queue.extendleft(reversed(_chunks(m)))
                return self._fill_chunk(queue.popleft(), batch)
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
        return n

    @staticmethod
    def _fill_chunk(c: _Chunk, batch: raft_pb2.MessageBatch) -> int:
        chunk = batch.chunk
        chunk.offset, chunk.total, chunk.data = c.offset, c.total, c.data
        if c.message is not None:
            fill_message_pb(chunk.message, c.message)
        return 1

    async def _note_failure(
        self, peer: _Peer, call: grpc.aio.StreamUnaryCall, exc: Exception
    ) -> None:
        code: grpc.StatusCode | None = None
        details: str | None = None
        if isinstance(exc, _StreamEnded):
            code, details = exc.code, exc.details
        elif isinstance(exc, grpc.aio.AioRpcError):
            code, details = exc.code(), exc.details()
        elif call.done():
            code, details = await call.code(), await call.details()
        if code is not None:
            error = code.name
        elif isinstance(exc, TimeoutError):
            error = "TIMEOUT"
        else:
            error = type(exc).__name__
        peer.failures += 1
        if code in _AUTH_CODES:
            peer.auth_failures += 1
        # Log each kind of failure once per outage, not on every retry.
        level = logging.WARNING if error != peer.last_error else logging.DEBUG
        peer.last_error = error
        log.log(
            level,
            "stream %d->%d (%s) failed: %s %s",
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
                "received": p.received,
                "last_error": p.last_error,
            }
            for node_id, p in self._peers.items()
        }

    # --- inbound ------------------------------------------------------------------------

    def peer_came_back(self, from_id: int) -> None:
        """`from_id` opened a stream to us: if ours to it is down, reconnect now rather
        than after the backoff it grew while the peer was away."""
        back = self._peers.get(from_id)
        if back is not None and not back.connected:
            back.came_back.set()

    def deliver(self, from_id: int, batch: raft_pb2.MessageBatch,
                pieces: _Pieces | None = None) -> None:
        """Decode a batch received from `from_id` and hand what is for us to the receiver;
        anything else (for another member, undecodable, local-only) is counted and dropped.
        A snapshot piece is kept in `pieces` (the stream's) until its message completes it."""
        if batch.HasField("chunk"):
            self._deliver_piece(from_id, batch.chunk, pieces or _Pieces())
            return
        self._hand_over(from_id, batch.messages)

    def _deliver_piece(self, from_id: int, chunk: raft_pb2.SnapshotChunk,
                       pieces: _Pieces) -> None:
        if chunk.offset != pieces.received:  # a piece went missing: drop the snapshot
            pieces.parts.clear()
            pieces.received = 0
            if chunk.offset != 0:
                self.dropped_inbound += 1
                return
        pieces.parts.append(chunk.data)
        pieces.received += len(chunk.data)
        if not chunk.HasField("message"):
            return
        data, complete = b"".join(pieces.parts), pieces.received == chunk.total
        pieces.parts.clear()
        pieces.received = 0
        if not complete:
            self.dropped_inbound += 1
            log.warning("dropping a snapshot from %d: %d of %d bytes arrived", from_id,
                        len(data), chunk.total)
            return
        self._hand_over(from_id, [chunk.message], data)

    def _hand_over(self, from_id: int, messages: Iterable[raft_pb2.Message],
                   snapshot_data: bytes | None = None) -> None:
        me = self.node_id
        local = LOCAL_MESSAGES
        out: list[Message] = []
        for p in messages:
            if p.to != me:
                self.dropped_inbound += 1
                continue
            try:
                m = message_from_pb(p)
            except ValueError as exc:
                self.dropped_inbound += 1
                log.warning("dropping undecodable message from %d: %s", from_id, exc)
                continue
            if m.type in local:
                self.dropped_inbound += 1
                continue
            if snapshot_data is not None and m.snapshot is not None:
                m = dataclasses.replace(m, snapshot=dataclasses.replace(m.snapshot,
                                                                        data=snapshot_data))
            out.append(m)
        if not out:
            return
        peer = self._peers.get(from_id)
        if peer is not None:
            peer.received += len(out)
        try:
            self._on_messages(out)
        except Exception:
            log.exception("on_messages failed for a batch from %d", from_id)


@dataclasses.dataclass(slots=True)
class _Pieces:
    """The pieces of a snapshot received so far on one stream."""

    parts: list[bytes] = dataclasses.field(default_factory=list)
    received: int = 0


class _Servicer(raft_pb2_grpc.RaftTransportServicer):
    def __init__(self, transport: PeerTransport) -> None:
        self._t = transport

    async def Stream(self, request_iterator, context):  # noqa: N802 - gRPC method name
        t = self._t
        if t.closed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "transport closed")
        from_id = await t.auth.authenticate(context)
        await context.send_initial_metadata(((MD_ACCEPTED, "1"),))
        t.peer_came_back(from_id)
        pieces = _Pieces()  # of a snapshot arriving on this stream
        async for batch in request_iterator:
            if t.closed:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "transport closed")
            t.deliver(from_id, batch, pieces)
        return raft_pb2.StreamAck()
