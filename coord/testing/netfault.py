"""Network partitions on loopback, for fault tests: a TCP gate in front of a member's
peer port. Other members reach the member only through its gate; `cut()` resets every
connection through it and refuses new ones (a firewall REJECT), `heal()` lets traffic
through again; `delay_s` holds every byte through it that long (a slow link, in order,
without slowing the link's throughput). Raft messages to a member travel only on
connections to its peer port, so a cut member hears from nobody: it is partitioned off,
while its client port stays reachable (this machine has no iptables; namespaces would
need non-loopback addresses)."""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

ACCEPT_POLL_S = 0.2
CHUNK = 65536


class TcpGate:
    def __init__(self, listen_port: int, target: tuple[str, int],
                 connect: Callable[[tuple[str, int]], socket.socket] | None = None) -> None:
        """`connect(target)` opens the upstream connection (default: a plain TCP
        connect; the chaos harness passes one that connects inside a network namespace)."""
        self.address = ("127.0.0.1", listen_port)
        self.target = target
        self._connect = connect or (lambda t: socket.create_connection(t, timeout=1.0))
        self._open = True
        self.delay_s = 0.0  # how long each byte waits in the gate, each way
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._server = socket.create_server(self.address, reuse_port=False)
        self._server.settimeout(ACCEPT_POLL_S)
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"gate-{listen_port}")
        self._thread.start()

    @property
    def is_open(self) -> bool:
        return self._open

    def cut(self) -> None:
        """Reset every connection through the gate and refuse new ones."""
        with self._lock:
            self._open = False
            socks, self._sockets = self._sockets, set()
        for s in socks:
            _close(s)

    def heal(self) -> None:
        self._open = True

    def stop(self) -> None:
        self._stopped.set()
        self.cut()
        self._thread.join(2 * ACCEPT_POLL_S + 1)
        self._server.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._open:
                _close(conn)
                continue
            try:
                upstream = self._connect(self.target)
            except OSError:
                _close(conn)
                continue
            upstream.settimeout(None)
            conn.settimeout(None)
            with self._lock:
                if not self._open:
                    _close(conn)
                    _close(upstream)
                    continue
                self._sockets.update((conn, upstream))
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Copy until either side closes (a cut closes both). Bytes go out `delay_s`
        after they came in, through a delay line: the reader never waits for the
        writer, so a delayed link keeps its throughput and its order."""
        line: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()
        writer = threading.Thread(target=self._send_when_due, args=(line, src, dst),
                                  daemon=True)
        writer.start()
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                line.put((time.monotonic() + self.delay_s, data))
        except OSError:
            pass
        finally:
            line.put(None)
            writer.join()
            with self._lock:
                self._sockets.discard(src)
                self._sockets.discard(dst)
            _close(src)
            _close(dst)

    @staticmethod
    def _send_when_due(line: queue.SimpleQueue, src: socket.socket,
                       dst: socket.socket) -> None:
        try:
            while (item := line.get()) is not None:
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            _close(src)  # the far side is gone: end the reader too
            while line.get() is not None:  # drain until the reader says it ended
                pass


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
