"""The HTTP side of `--listen-metrics-urls` (etcd's flag): GET /metrics, /health,
/livez and /readyz, served on the member's event loop, so every answer reads the
member's state between two of its steps (no thread reads it half-changed).

Only what a scraper or a load balancer sends is understood: one GET (or HEAD) per
connection, its headers read within HEADER_TIMEOUT_S and HEADER_LIMIT bytes, answered
with `Connection: close`. The text format itself is prometheus_client's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 5.0
HEADER_LIMIT = 16 * 1024
TEXT = "text/plain; charset=utf-8"
JSON = "application/json"

Answer = tuple[int, str, bytes]
"""(HTTP status, content type, body)."""
Route = Callable[[], Awaitable[Answer]]
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           500: "Internal Server Error", 503: "Service Unavailable"}


def parse_metrics_url(url: str) -> tuple[str, int]:
    """(host, port) of an `http://HOST:PORT` URL; ValueError naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"--listen-metrics-urls {url!r}: only http://HOST:PORT is served")
    if parts.path not in ("", "/") or parts.query or not parts.hostname:
        raise ValueError(f"--listen-metrics-urls {url!r}: give http://HOST:PORT, no path")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ValueError(f"--listen-metrics-urls {url!r}: the port is missing or not a number")
    return parts.hostname, port


class HttpEndpoint:
    """Serves `routes` (path -> coroutine giving the answer) on every URL."""

    def __init__(self, urls: list[str], routes: dict[str, Route]) -> None:
        self.addresses = [parse_metrics_url(u) for u in urls]
        self.routes = routes
        self._servers: list[asyncio.Server] = []

    async def start(self) -> None:
        """Bind every address; a taken one fails the start naming the flag."""
        for host, port in self.addresses:
            try:
                server = await asyncio.start_server(self._serve, host, port,
                                                    limit=HEADER_LIMIT)
            except OSError as e:
                await self.stop()
                raise OSError(f"cannot listen on {host}:{port} (--listen-metrics-urls):"
                              f" {e.strerror or e}") from None
            self._servers.append(server)

    @property
    def ports(self) -> list[int]:
        """The ports bound (a URL with port 0 gets a free one)."""
        return [s.sockets[0].getsockname()[1] for s in self._servers]

    async def stop(self) -> None:
        servers, self._servers = self._servers, []
        for s in servers:
            s.close()
        for s in servers:
            await s.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT_S)
            status, kind, body, send_body = await self._answer(head)
            writer.write(
                f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + (body if send_body else b""))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            pass  # a client that sent no full request, or left: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, head: bytes) -> tuple[int, str, bytes, bool]:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(request_line) != 3:
            return 400, TEXT, b"bad request\n", True
        method, target, _version = request_line
        if method not in ("GET", "HEAD"):
            return 405, TEXT, b"only GET and HEAD\n", True
        route = self.routes.get(target.split("?", 1)[0])
        if route is None:
            return 404, TEXT, b"not found\n", method == "GET"
        try:
            status, kind, body = await route()
        except Exception:  # a bug in an answer: the scraper is told, the member goes on
            log.exception("GET %s failed", target)
            return 500, TEXT, b"internal error\n", method == "GET"
        return status, kind, body, method == "GET"
