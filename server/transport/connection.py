"""One Raft connection between two members, both its ends, over `frames`.

`Outbound`, the opener's end, presents our credentials (a ``PeerHello``), then writes
the batches the transport's pump gives it, pausing past `WRITE_BUFFER_HIGH` bytes
unsent, so a slow peer pushes back through TCP into the transport's queue. A ping every
second, answered by the peer, notices a peer that is paused or cut off without a reset:
no answer for 3 s and the connection ends. `Inbound`, the listener's end, refuses, with
the reason, a first frame that is not a ``PeerHello`` `auth.PeerAuth` accepts; then it
answers pings and hands each batch to the transport's inbox (`peer_inbox`).

With peer TLS the opener's end speaks TLS from the first byte (the peer's certificate
verified against the peer CA and for the address dialled; ours presented), and the
listener terminates it (`listener.PeerPort`): the frames are the same inside. A
connection that TLS refused ends with the code "TLS" and OpenSSL's reason.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from google.protobuf.message import DecodeError

from coord.server.transport.auth import PeerAuth
from coord.server.transport.frames import PREAMBLE, FrameError, FrameReader, Kind, frame
from coord.v1 import raft_pb2

if TYPE_CHECKING:
    from coord.server.transport.peer import PeerTransport

__all__ = ["ConnectionEnded", "Inbound", "Outbound", "no_delay", "split_address"]

PING_INTERVAL = 1.0
DEAD_AFTER = 3.0
"""A connection whose peer has sent nothing (not even a pong) for this long is dropped."""
INBOUND_IDLE = 10.0
"""An inbound connection silent this long (its opener pings every PING_INTERVAL) is closed."""
WRITE_BUFFER_HIGH = 4 * 1024 * 1024
"""Past this many bytes not yet taken by the kernel, the sender waits before writing more."""

_PONG = frame(Kind.PONG)
_PING = frame(Kind.PING)


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" (an IPv6 host in brackets: "[::1]:2380")."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host.removeprefix("[").removesuffix("]"), int(port)


def no_delay(tr: asyncio.BaseTransport) -> None:
    """Send small frames at once (no Nagle delay): each is a Raft round trip's half."""
    sock = tr.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ConnectionEnded(Exception):
    """The connection ended: the peer refused it or closed it, or stopped answering."""

    def __init__(self, code: str, details: str | None) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class Outbound(asyncio.Protocol):
    """Our connection to a peer: what the peer sends back (its yes or no, pongs) and the
    state of our writes. The transport's pump writes; `wakeup` is the peer's event, set
    when the connection ends so the pump sees it."""

    def __init__(self, wakeup: asyncio.Event, tls: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._wakeup = wakeup
        self._tls = tls
        self._tr: asyncio.Transport | None = None
        self._reader = FrameReader()
        self.accepted: asyncio.Future[None] = loop.create_future()
        self.ended: ConnectionEnded | None = None
        self.paused = False
        self._drained: asyncio.Future[None] | None = None
        self._heard = loop.time()
        self._pinger: asyncio.TimerHandle | None = None
        self._snapshot_sent = False
        # what the peer holds of a snapshot we were sending it (its ACCEPT says), for the
        # transport to resume that snapshot from (`snapshot_pieces.cut`)
        self.held: raft_pb2.SnapshotHeld | None = None

    @classmethod
    async def open(cls, auth: PeerAuth, to_id: int, address: str, wakeup: asyncio.Event,
                   tls: ssl.SSLContext | None = None) -> Outbound:
        """Connect to `address` (over TLS with `tls`), present our credentials, and wait
        for the peer's yes."""
        host, port = split_address(address)
        loop = asyncio.get_running_loop()
        link = cls(wakeup, tls is not None)
        try:
            tr, _ = await loop.create_connection(lambda: link, host, port, ssl=tls,
                                                 server_hostname=host if tls else None)
        except BaseException:
            # uvloop closes a connection whose connect is cancelled once connected without
            # telling the protocol (no connection_lost): end it here, its pings with it
            link.close()
            raise
        try:
            hello = raft_pb2.PeerHello(cluster=auth.cluster_id, auth=auth.token_for(to_id))
            setattr(hello, "from", auth.node_id)
            tr.write(PREAMBLE + frame(Kind.HELLO, hello.SerializeToString()))
            await link.accepted
        except BaseException:
            tr.close()
            raise
        return link

    # --- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tr = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        no_delay(transport)
        self._tr.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._pinger = self._loop.call_later(PING_INTERVAL, self._ping)

    def data_received(self, data: bytes) -> None:
        self._heard = self._loop.time()
        try:
            frames = self._reader.feed(data)
        except FrameError as exc:
            self._end("INTERNAL", str(exc))
            return
        for kind, payload in frames:
            if kind == Kind.PONG:
                continue
            if kind == Kind.ACCEPT and not self.accepted.done():
                yes = raft_pb2.PeerAccept()
                try:
                    yes.ParseFromString(payload)
                except DecodeError:
                    self._end("INTERNAL", "undecodable accept")
                    return
                self.held = yes.held if yes.HasField("held") else None
                self.accepted.set_result(None)
            elif kind == Kind.REFUSE:
                why = raft_pb2.PeerRefusal()
                try:
                    why.ParseFromString(payload)
                except DecodeError:
                    why.code, why.details = "INTERNAL", "undecodable refusal"
                self._end(why.code or "UNKNOWN", why.details)
                return
            else:
                self._end("INTERNAL", f"unexpected frame {Kind(kind).name} from the peer")
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ssl.SSLError):  # the peer's TLS refused us: its alert says why
            self._end("TLS", f"refused by the peer's TLS: {exc}")
            return
        if exc is None and self._tls and not self.accepted.done():
            # TLS 1.3 checks our certificate after our side of the handshake is done, and
            # a refusal closes without an alert reaching us
            self._end("TLS", "closed by the peer before accepting us: it may not trust our"
                             " certificate (its log says why)")
            return
        self._end("UNAVAILABLE", f"connection lost: {exc}" if exc else "closed by the peer")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # --- used by the transport ------------------------------------------------------------

    def send(self, payload: bytes, snapshot: bool) -> None:
        """Write one batch frame (its bytes)."""
        assert self._tr is not None
        self._tr.write(frame(Kind.BATCH, payload))
        self._snapshot_sent = self._snapshot_sent or snapshot

    async def drained(self) -> None:
        """Wait until the write buffer is below its limit, or the connection ended."""
        if self.paused and self.ended is None:
            self._drained = self._loop.create_future()
            await self._drained

    def unsent_snapshot(self) -> bool:
        """Did a snapshot go into this connection with bytes still unsent at its end?"""
        tr = self._tr
        return self._snapshot_sent and tr is not None and tr.get_write_buffer_size() > 0

    def close(self) -> None:
        self._end("CANCELLED", "closed by us")

    def _ping(self) -> None:
        if self.ended is not None or self._tr is None:
            return
        silent = self._loop.time() - self._heard
        if silent > DEAD_AFTER:
            self._end("UNAVAILABLE", f"no answer to pings for {silent:.1f} s")
            return
        self._tr.write(_PING)
        self._pinger = self._loop.call_later(PING_INTERVAL, self._ping)

    def _end(self, code: str, details: str) -> None:
        if self.ended is None:
            self.ended = ConnectionEnded(code, details)
        if self._pinger is not None:
            self._pinger.cancel()
        if not self.accepted.done():
            self.accepted.set_exception(self.ended)
            self.accepted.exception()  # retrieved: nobody may be waiting any more
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._tr is not None and not self._tr.is_closing():
            self._tr.close()
        self._wakeup.set()


class Inbound:
    """A connection a peer opened to us: its hello, then its batches and pings. Fed by
    the peer port's connection (`listener.PeerPort`), which owns the socket."""

    def __init__(self, t: PeerTransport, tr: asyncio.Transport,
                 on_lost: Callable[[Inbound], None]) -> None:
        self._t = t
        self._tr = tr
        self._on_lost = on_lost
        self._reader = FrameReader.for_stranger()  # until the opener authenticates
        self._from = 0
        self._heard = True
        self._idle = asyncio.get_running_loop().call_later(INBOUND_IDLE, self._check_idle)
        no_delay(tr)

    def data_received(self, data: bytes) -> None:
        self._heard = True
        t = self._t
        try:
            frames = self._reader.feed(data)
        except FrameError as exc:
            t.inbox.dropped += 1
            self.refuse("INVALID_ARGUMENT", str(exc))
            return
        for kind, payload in frames:
            if self._tr.is_closing():
                return
            if t.closed:
                self.refuse("UNAVAILABLE", "transport closed")
                return
            if kind == Kind.BATCH and self._from:
                try:
                    batch = raft_pb2.MessageBatch.FromString(payload)
                except DecodeError:
                    t.inbox.dropped += 1
                    self.refuse("INVALID_ARGUMENT", "undecodable batch")
                    return
                t.inbox.deliver(self._from, batch)
            elif kind == Kind.PING:
                self._tr.write(_PONG)
            elif kind == Kind.HELLO and not self._from:
                self._hello(payload)
            else:
                self.refuse("INVALID_ARGUMENT", f"unexpected {Kind(kind).name} frame")
                return

    def _hello(self, payload: bytes) -> None:
        hello = raft_pb2.PeerHello()
        try:
            hello.ParseFromString(payload)
        except DecodeError:
            self.refuse("UNAUTHENTICATED", "undecodable hello")
            return
        from_id = getattr(hello, "from")
        refusal = self._t.auth.check(from_id, hello.cluster, hello.auth)
        if refusal is not None:
            self.refuse(*refusal)
            return
        self._from = from_id
        self._reader.trust()
        held = self._t.inbox.receipts.held(from_id)
        yes = raft_pb2.PeerAccept(held=held) if held is not None else raft_pb2.PeerAccept()
        self._tr.write(frame(Kind.ACCEPT, yes.SerializeToString()))
        self._t.peer_came_back(from_id)

    def refuse(self, code: str, details: str) -> None:
        """Tell the opener why, and close."""
        if not self._tr.is_closing():
            why = raft_pb2.PeerRefusal(code=code, details=details)
            self._tr.write(frame(Kind.REFUSE, why.SerializeToString()))
            self._tr.close()

    def connection_lost(self, _exc: Exception | None) -> None:
        self._idle.cancel()
        self._on_lost(self)

    def _check_idle(self) -> None:
        if not self._heard:
            self._tr.close()
            return
        self._heard = False
        self._idle = asyncio.get_running_loop().call_later(INBOUND_IDLE, self._check_idle)
