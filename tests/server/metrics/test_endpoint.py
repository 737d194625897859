"""The metrics endpoint's HTTP on its own (127.0.0.1, port 0): routes, refusals, a client
that sends no full request, the URL flag's checks; and the tally's buckets."""

from __future__ import annotations

import asyncio

import pytest

from coord.server.metrics.endpoint import HEADER_LIMIT, HttpEndpoint, parse_metrics_url
from coord.server.metrics.tally import Tally


async def _exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


async def _ok():
    return 200, "text/plain", b"fine\n"


async def _broken():
    raise RuntimeError("a bug in an answer")


def _served(requests: list[bytes]) -> list[bytes]:
    async def run() -> list[bytes]:
        endpoint = HttpEndpoint(["http://127.0.0.1:0"], {"/here": _ok, "/broken": _broken})
        await endpoint.start()
        try:
            return [await _exchange(endpoint.ports[0], r) for r in requests]
        finally:
            await endpoint.stop()
    return asyncio.run(run())


def test_routes_and_refusals():
    get, head, post, missing, query, junk, broken = _served([
        b"GET /here HTTP/1.1\r\nHost: x\r\n\r\n",
        b"HEAD /here HTTP/1.1\r\n\r\n",
        b"POST /here HTTP/1.1\r\n\r\n",
        b"GET /elsewhere HTTP/1.1\r\n\r\n",
        b"GET /here?x=1 HTTP/1.1\r\n\r\n",
        b"nonsense\r\n\r\n",
        b"GET /broken HTTP/1.1\r\n\r\n",
    ])
    assert get.startswith(b"HTTP/1.1 200 OK\r\n") and get.endswith(b"\r\n\r\nfine\n")
    assert b"Content-Length: 5\r\n" in get and b"Connection: close\r\n" in get
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    assert post.startswith(b"HTTP/1.1 405 ")
    assert missing.startswith(b"HTTP/1.1 404 ")
    assert query.endswith(b"fine\n")
    assert junk.startswith(b"HTTP/1.1 400 ")
    assert broken.startswith(b"HTTP/1.1 500 ")


def test_a_request_that_never_ends_its_headers_gets_no_answer():
    (too_long,) = _served([b"GET /here HTTP/1.1\r\nX: " + b"a" * (HEADER_LIMIT + 10)])
    assert too_long == b""


def test_a_taken_port_fails_the_start_naming_the_flag():
    async def run() -> None:
        first = HttpEndpoint(["http://127.0.0.1:0"], {})
        await first.start()
        try:
            second = HttpEndpoint([f"http://127.0.0.1:{first.ports[0]}"], {})
            with pytest.raises(OSError, match="--listen-metrics-urls"):
                await second.start()
        finally:
            await first.stop()
    asyncio.run(run())


@pytest.mark.parametrize("url", ["https://127.0.0.1:9", "127.0.0.1:9", "http://127.0.0.1",
                                 "http://127.0.0.1:9/metrics", "http://127.0.0.1:x"])
def test_metrics_urls_other_than_http_host_port_are_refused(url):
    with pytest.raises(ValueError, match="--listen-metrics-urls"):
        parse_metrics_url(url)


def test_parse_metrics_url():
    assert parse_metrics_url("http://127.0.0.1:2381") == ("127.0.0.1", 2381)
    assert parse_metrics_url("http://[::1]:2381/") == ("::1", 2381)


def test_tally_buckets_are_cumulative_with_each_bound_inclusive():
    t = Tally((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 7.0):
        t.observe(v)
    assert t.buckets() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert t.count == 5 and t.total == pytest.approx(8.65)
