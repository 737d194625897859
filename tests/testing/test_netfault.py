"""The TCP gate tests and the chaos harness put between members: it passes bytes, a cut
resets and refuses, a delay holds every byte at least that long, in order."""

from __future__ import annotations

import socket
import threading
import time

from coord.testing.netfault import TcpGate
from coord.testing.ports import free_port


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def echo(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed at the end of the test
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "closed early"
        out += chunk
    return out


def _closed(sock: socket.socket) -> bool:
    """The far end closed or reset the connection (a cut may do either)."""
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_delayed_gate_holds_each_byte_and_keeps_order():
    server, port = _echo_server()
    gate = TcpGate(free_port(), ("127.0.0.1", port))
    try:
        gate.delay_s = 0.15
        with socket.create_connection(gate.address, timeout=5) as c:
            sent = time.monotonic()
            c.sendall(b"a" * 10 + b"b" * 10)
            c.sendall(b"c" * 10)
            assert _read(c, 30) == b"a" * 10 + b"b" * 10 + b"c" * 10
            # through the gate twice (there and back): at least two delays, never less
            assert time.monotonic() - sent >= 0.3
            gate.delay_s = 0.0
            c.sendall(b"d")
            assert _read(c, 1) == b"d"
    finally:
        gate.stop()
        server.close()


def test_a_cut_resets_connections_and_refuses_new_ones_until_healed():
    server, port = _echo_server()
    gate = TcpGate(free_port(), ("127.0.0.1", port))
    try:
        c = socket.create_connection(gate.address, timeout=5)
        c.sendall(b"x")
        assert _read(c, 1) == b"x"
        gate.cut()
        assert _closed(c)
        c.close()
        refused = socket.create_connection(gate.address, timeout=5)
        assert _closed(refused)  # accepted, then closed at once
        refused.close()
        gate.heal()
        with socket.create_connection(gate.address, timeout=5) as again:
            again.sendall(b"y")
            assert _read(again, 1) == b"y"
    finally:
        gate.stop()
        server.close()
