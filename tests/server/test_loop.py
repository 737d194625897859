"""The member's event loop choice (coord.server.loop): uvloop by default, asyncio's on
request, a clear error for anything else. (Every process-based cluster test runs its
members on the default, uvloop.)"""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from coord.server import loop


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_uvloop_is_the_default_and_asyncio_is_a_choice():
    assert loop.run(_loop_type()) is uvloop.Loop
    plain = loop.run(_loop_type(), "asyncio")
    assert issubclass(plain, asyncio.BaseEventLoop) and plain is not uvloop.Loop


def test_an_unknown_loop_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown event loop 'trio'"):
        loop.loop_factory("trio")


def test_the_serve_flag_offers_exactly_the_loops_there_are():
    import argparse

    from coord.server.config import add_serve_flags

    parser = add_serve_flags(argparse.ArgumentParser())
    assert parser.parse_args([]).event_loop == "uvloop"
    assert parser.parse_args(["--event-loop", "asyncio"]).event_loop == "asyncio"
    with pytest.raises(SystemExit):
        parser.parse_args(["--event-loop", "trio"])
