"""`AsyncClient`'s failover and retries (coord.client.aio), against scripted members on
real gRPC servers (tests.client.fakes): a write fails over under one request_id, an
ambiguous failure of an unsafe write is not repeated, an unreachable member is
skipped, an open refused as the member went read-only is opened again there; and a
client's endpoints start at a random member unless told otherwise."""

from __future__ import annotations

import asyncio
import threading

import pytest

from coord.client import AsyncClient, Client, DeadlineError, ReadOnlyError
from tests.client.fakes import FAST, wresp


def test_clients_randomize_their_start_by_default_and_not_when_told():
    lists = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    assert {AsyncClient(lists).ring.current()[0] for _ in range(300)} == {0, 1, 2}
    assert {AsyncClient(lists, randomize_endpoints=False).ring.current()[0]
            for _ in range(50)} == {0}


def test_write_fails_over_with_the_same_request_id(members):
    a, b = members
    a.behaviour["Put"] = "no_leader"
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        result = client.put("k", "v")
        assert result.header.member == "b"
        assert a.requests["Put"][0].request_id == b.requests["Put"][0].request_id != ""
        assert client.ring.current()[1] == b.endpoint  # later calls go to b directly


def test_ambiguous_failure_of_unsafe_write_is_not_repeated(members):
    a, b = members
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        with pytest.raises(DeadlineError):
            client.compact(3)
    assert len(a.requests["Compact"]) == 1 and "Compact" not in b.requests


def test_unreachable_member_is_skipped(members):
    a, b = members
    with Client(["127.0.0.1:1", b.endpoint], timeout=2, policy=FAST, stream=False) as client:
        assert client.put("k", "v").header.member == "b"
        assert client.get("k") is None


def test_an_open_refused_as_the_member_went_read_only_is_opened_again_there(members):
    """The member switched to read-only while the open waited (READ_ONLY: not applied);
    a read-only client opens again and gets the member-local session; others are told."""
    a = members[0]
    a.behaviour["OpenSession"] = "went_read_only"
    with Client([a.endpoint], read_only_ok=True, timeout=2.0, policy=FAST, stream=False) as client:
        info = client.open_session("x", 3.0)
        assert info.local and info.session_id == (1 << 62) + 5
        first, again = a.requests["OpenSession"]
        assert first.request_id == again.request_id and again.read_only_ok
        with pytest.raises(ReadOnlyError):
            client.open_session("y", 3.0, read_only_ok=False)
    assert len(a.requests["OpenSession"]) == 3


def test_async_client_fails_over_and_watches(members):
    a, b = members
    a.behaviour["Put"] = "no_leader"
    b.behaviour["Watch"] = [wresp((b"k1", 11))]

    async def main() -> None:
        async with AsyncClient([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                               randomize_endpoints=False) as client:
            assert (await client.put("k", "v")).header.member == "b"
            async with client.watch("k1") as stream:
                event = await stream.__anext__()
                assert event.kv.key == b"k1"
            sever = threading.Event()
            b.behaviour["Events"] = sever
            severed: list = []
            async with client.session(ttl=3, on_severed=severed.append) as s:
                assert s.id == 77
                sever.set()
                await asyncio.wait_for(s.fenced.wait(), 5)
                assert [e.type async for e in s.events(timeout=1)] == ["severed"]
            assert [e.type for e in severed] == ["severed"]

    asyncio.run(main())
    assert a.requests["Put"][0].request_id == b.requests["Put"][0].request_id
