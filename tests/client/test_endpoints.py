"""The endpoint list and the current endpoint (coord.client.endpoints): parsing, one
rotation per failure of the current member, and a random start when asked."""

from __future__ import annotations

import pytest

from coord.client.endpoints import DEFAULT_ENDPOINTS, EndpointRing, parse_endpoints


def test_parse_endpoints(monkeypatch):
    monkeypatch.delenv("COORD_ENDPOINTS", raising=False)
    assert parse_endpoints(None) == list(DEFAULT_ENDPOINTS)
    monkeypatch.setenv("COORD_ENDPOINTS", "h1:1, h2:2,h1:1")
    assert parse_endpoints(None) == ["h1:1", "h2:2"]
    assert parse_endpoints(["a:1", "b:2,c:3"]) == ["a:1", "b:2", "c:3"]
    with pytest.raises(ValueError):
        parse_endpoints(" , ")


def test_endpoint_ring_rotates_once_per_failure_of_the_current_member():
    ring = EndpointRing(["a", "b", "c"])
    i, ep = ring.current()
    assert (i, ep) == (0, "a")
    ring.failed(0)
    ring.failed(0)  # a second caller saw the same member fail: no double skip
    assert ring.current() == (1, "b")
    ring.failed(1)
    ring.failed(2)
    assert ring.current() == (0, "a")  # wraps around


def test_endpoint_rings_start_at_a_random_member_when_asked():
    """Clients given the same list must not all land on its first member (ZooKeeper's
    and kazoo's clients shuffle theirs). 300 rings of 3: each start is missed by all of
    them with probability (2/3)^300."""
    starts = {EndpointRing(["a", "b", "c"], randomize=True).current() for _ in range(300)}
    assert starts == {(0, "a"), (1, "b"), (2, "c")}
    assert {EndpointRing(["a", "b", "c"]).current() for _ in range(50)} == {(0, "a")}
    ring = EndpointRing(["a", "b", "c"], randomize=True)
    index, _ = ring.current()
    ring.failed(index)  # failover goes on in the list's order from wherever it started
    assert ring.current()[0] == (index + 1) % 3
