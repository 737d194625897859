"""Sessions kept alive in the background (coord.client.aio_session, through the sync
facade), against scripted members (tests.client.fakes): a session keeps its id across
members and is fenced the moment it is severed; closing closes it on the member, and a
keepalive answered `gone` fences it."""

from __future__ import annotations

import threading
import time

from coord.client import Client
from tests.client.fakes import FAST


def eventually(predicate, timeout: float = 5.0) -> bool:
    """`fenced` is set before on_severed runs (fencing must not wait for a callback)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_session_keeps_its_id_across_members_and_is_fenced_at_once(members):
    a, b = members
    a.behaviour["KeepAlive"] = "down"
    a.behaviour["Events"] = "down"
    sever = threading.Event()
    b.behaviour["Events"] = sever
    severed: list = []
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False) as client:
        session = client.session(ttl=3, on_severed=severed.append)
        assert session.id == 77
        deadline = time.monotonic() + 5
        while not b.requests.get("KeepAlive") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.requests["KeepAlive"][0].session_id == 77
        assert not session.fenced.is_set()
        sever.set()
        assert session.fenced.wait(5)
        assert session.ended is not None and session.ended.type == "severed"
        assert eventually(lambda: severed)
        assert [e.type for e in severed] == ["severed"] and severed[0].new_owner == 78
        assert [e.type for e in session.events(timeout=1)] == ["severed"]
        session.close()  # already over: no CloseSession needed, no error
        assert "CloseSession" not in b.requests
        assert len(severed) == 1


def test_session_close_closes_on_server_and_keepalive_gone_fences(members):
    a, b = members
    with Client([a.endpoint], timeout=2, policy=FAST, stream=False) as client:
        with client.session(ttl=3) as s:
            assert not s.fenced.is_set()
        assert s.fenced.is_set()
        assert a.requests["CloseSession"][0].session_id == 77
        a.behaviour["KeepAlive"] = "gone"
        gone: list = []
        s2 = client.session(ttl=3, on_severed=gone.append)
        assert s2.fenced.wait(5)
        assert eventually(lambda: gone) and gone[0].type == "gone"
        s2.close()
