"""The member's peer port: Raft connections and gRPC calls on one address.

Peers reach a member at one address (its ``--peer-listen``, named in the cluster's
membership) for two things: Raft traffic, which is plain frames
(`coord.server.transport.frames`), and the requests a follower forwards to its leader,
which are gRPC (the ``Forward`` service). The first bytes of a connection say which it is:
`frames.PREAMBLE`, or HTTP/2's client preface ("PRI * HTTP/2.0..."). A Raft connection is
served by the transport (`PeerTransport.accept`); a gRPC one is passed through, bytes
unchanged, to the member's peer gRPC server, which listens on a loopback port of its own.
Anything else is closed.

With peer TLS the port terminates TLS itself, before the sniff: routing stays the sniff of
the first decrypted bytes, one rule with TLS or without, and what is passed through to
the loopback gRPC server is the decrypted HTTP/2 (ALPN offers "h2": gRPC's TLS clients
insist on it). Connections are accepted by a loop of the port's own and each handed to
`loop.connect_accepted_socket`, which raises when a handshake fails: so a refused peer
(no certificate, or one from another CA) is logged with its address and OpenSSL's reason,
which a TLS server of asyncio's or uvloop's would drop silently.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Protocol, cast

from coord.server.transport.connection import no_delay, split_address
from coord.server.transport.frames import PREAMBLE
from coord.server.transport.peer import PeerTransport

__all__ = ["PeerPort"]

log = logging.getLogger(__name__)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SNIFF_TIMEOUT = 5.0
"""A connection that has not said what it is by then is closed (with TLS: one that has
not finished its handshake, and then again one that has not said what it is)."""
ACCEPT_PAUSE = 0.5
"""After accept() failed (out of file descriptors): a pause before the next, as asyncio's
own servers pause."""


class _Handler(Protocol):
    def data_received(self, data: bytes) -> None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


class PeerPort:
    """Listens on the peer address; see the module docstring."""

    def __init__(self, transport: PeerTransport, grpc_target: tuple[str, int] | None,
                 tls: ssl.SSLContext | None = None) -> None:
        """`grpc_target`: where the member's peer gRPC server listens (None: refuse gRPC).
        `tls`: every connection must open with a TLS handshake this context accepts
        (`coord.tls.credentials.server_context`)."""
        self.transport = transport
        self.grpc_target = grpc_target
        self.tls = tls
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._opening: set[asyncio.Task[None]] = set()  # accepted, not yet serving
        self._connections: set[_Connection] = set()

    async def start(self, address: str, flag: str = "--peer-listen") -> int:
        """Listen on "host:port" (port 0: any); return the port. A taken port is an OSError
        naming `flag`. Binds exclusively, like every coord server."""
        host, port = split_address(address)
        loop = asyncio.get_running_loop()
        try:
            family, *_, where = (await loop.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))[0]
            self._socket = sock = socket.create_server(where, family=family)
        except OSError as e:
            raise OSError(f"cannot listen on {address} ({flag}): {e.strerror or e}") from None
        sock.setblocking(False)
        self._accepting = loop.create_task(self._accept(sock), name=f"peer-port-{address}")
        return sock.getsockname()[1]

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:
                log.warning("peer port: accept failed: %s", exc)
                await asyncio.sleep(ACCEPT_PAUSE)
                continue
            task = loop.create_task(self._open(conn, peer))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(self, conn: socket.socket, peer: object) -> None:
        """Serve an accepted connection, after its TLS handshake with `tls`."""
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: _Connection(self, self._connections), conn, ssl=self.tls,
                ssl_handshake_timeout=SNIFF_TIMEOUT if self.tls is not None else None)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            # (the loop closed the connection: the socket is its own now, not ours to close)
            log.warning("peer port: refused a connection from %s: %s", _address(peer),
                        exc or type(exc).__name__)

    async def close(self) -> None:
        """Stop listening and close every connection it accepted."""
        tasks = [t for t in (self._accepting, *self._opening) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._accepting = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        for conn in list(self._connections):
            conn.abort()


class _Connection(asyncio.Protocol):
    """One accepted connection: sniffs its first bytes, then feeds its handler."""

    def __init__(self, port: PeerPort, open_connections: set[_Connection]) -> None:
        self._port = port
        self._open = open_connections  # the port's, to close them all when it closes
        self._tr: asyncio.Transport | None = None
        self._head = b""
        self._handler: _Handler | None = None
        self._pipe: _Passthrough | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tr = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self._open.add(self)
        self._timer = asyncio.get_running_loop().call_later(SNIFF_TIMEOUT, self._undecided)

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:
            self._handler.data_received(data)
            return
        assert self._tr is not None
        head = self._head + data
        if head.startswith(PREAMBLE):
            self._decided(self._port.transport.accept(self._tr), head[len(PREAMBLE):])
        elif head.startswith(H2_PREFACE):
            target = self._port.grpc_target
            if target is None:
                self._tr.close()
                return
            self._pipe = _Passthrough(self._tr, target)
            self._decided(self._pipe, head)
        elif PREAMBLE.startswith(head) or H2_PREFACE.startswith(head):
            self._head = head  # not enough yet to tell
        else:
            log.debug("closing a peer-port connection that is neither Raft nor gRPC")
            self._tr.close()

    def _decided(self, handler: _Handler, rest: bytes) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._head = b""
        self._handler = handler
        if rest:
            handler.data_received(rest)

    def _undecided(self) -> None:
        if self._handler is None and self._tr is not None:
            self._tr.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._open.discard(self)
        if self._handler is not None:
            self._handler.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._pipe is not None:
            self._pipe.pause_upstream(True)

    def resume_writing(self) -> None:
        if self._pipe is not None:
            self._pipe.pause_upstream(False)

    def abort(self) -> None:
        if self._tr is not None:
            self._tr.abort()


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class _Passthrough:
    """A gRPC connection passed to the member's peer gRPC server: bytes each way,
    unchanged. Each side stops reading while the other cannot take more."""

    def __init__(self, down: asyncio.Transport, target: tuple[str, int]) -> None:
        self._down = down
        self._up: asyncio.Transport | None = None
        self._pending: list[bytes] = []
        down.pause_reading()
        self._task = asyncio.get_running_loop().create_task(self._connect(target))

    async def _connect(self, target: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        try:
            up, _ = await loop.create_connection(lambda: _Upstream(self._down), *target)
        except OSError as exc:
            log.warning("peer port: cannot reach the peer gRPC server at %s: %s", target, exc)
            self._down.close()
            return
        if self._down.is_closing():
            up.close()
            return
        no_delay(up)
        self._up = up = cast(asyncio.Transport, up)
        up.write(b"".join(self._pending))
        self._pending.clear()
        self._down.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._up is not None:
            self._up.write(data)
        else:
            self._pending.append(data)

    def connection_lost(self, _exc: Exception | None) -> None:
        self._task.cancel()
        if self._up is not None:
            self._up.close()

    def pause_upstream(self, paused: bool) -> None:
        """The client side's write buffer is full (True) or has room again (False)."""
        if self._up is not None and not self._up.is_closing():
            if paused:
                self._up.pause_reading()
            else:
                self._up.resume_reading()


class _Upstream(asyncio.Protocol):
    """The passthrough's connection to the peer gRPC server."""

    def __init__(self, down: asyncio.Transport) -> None:
        self._down = down
        self._tr: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tr = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self._down.write(data)

    def connection_lost(self, _exc: Exception | None) -> None:
        self._down.close()

    def pause_writing(self) -> None:
        if not self._down.is_closing():
            self._down.pause_reading()

    def resume_writing(self) -> None:
        if not self._down.is_closing():
            self._down.resume_reading()
