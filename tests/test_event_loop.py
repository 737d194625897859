"""The member's event loop choice (coord.event_loop): uvloop by default, asyncio's on
request, a clear error for anything else (every process-based cluster test runs its
members on the default, uvloop); and the member process's cyclic-collector thresholds."""

from __future__ import annotations

import ast
import asyncio
import gc
import subprocess
import sys

import pytest
import uvloop

from coord import event_loop as loop


@pytest.fixture(autouse=True)
def _thresholds_kept():
    """`loop.run` tunes the process's collector, as a member's should: not pytest's."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


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

    from coord.serve_flags import add_serve_flags

    parser = add_serve_flags(argparse.ArgumentParser())
    assert parser.parse_args([]).event_loop == "uvloop"
    assert parser.parse_args(["--event-loop", "asyncio"]).event_loop == "asyncio"
    with pytest.raises(SystemExit):
        parser.parse_args(["--event-loop", "trio"])


def test_a_member_process_looks_at_its_oldest_generation_rarely():
    """In a fresh process, as `coord serve` starts: the young thresholds stay Python's,
    the full pass waits for FULL_COLLECTION_EVERY young ones (see its docstring)."""
    code = ("import asyncio, gc\n"
            "from coord import event_loop as loop\n"
            "print(gc.get_threshold())\n"
            "async def main():\n"
            "    return gc.get_threshold()\n"
            "print(loop.run(main()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split("\n")
    default = ast.literal_eval(out[0])
    assert ast.literal_eval(out[1]) == (default[0], default[1], loop.FULL_COLLECTION_EVERY)
    assert loop.FULL_COLLECTION_EVERY > 10 * default[2]
