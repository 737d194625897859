"""Members inside the calling process, for test rigs: no interpreter to start and nothing
to import, so a cluster serves within a fraction of a second. Every member runs on one
asyncio loop in one background thread (gRPC's asyncio servers share it); the caller's
threads stay free to use any client, sync or asyncio."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from coord.server.config import MemberConfig
from coord.server.member import Member

T = TypeVar("T")


class EmbeddedLoop:
    """The background thread and its event loop; `run` executes a coroutine there. One
    per process (`shared()`), never closed: gRPC's asyncio engine stays bound to the
    loop it first ran on, so a closed loop would break every later cluster. Its worker
    threads (`asyncio.to_thread`: a member's disk-size reads) are named `coord-embedded-*`
    too, so a test that counts the threads of a client beside it can tell them apart."""

    _shared: EmbeddedLoop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(
            ThreadPoolExecutor(thread_name_prefix="coord-embedded-worker"))
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="coord-embedded", daemon=True
        )
        self._thread.start()

    @classmethod
    def shared(cls) -> EmbeddedLoop:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


class EmbeddedMember:
    """One member on an EmbeddedLoop. `stop(grace=0)` is the in-process kill: calls in
    flight are cut off; what the log had made durable stays (it fsyncs before acking)."""

    def __init__(self, runtime: EmbeddedLoop, config: MemberConfig) -> None:
        self.runtime = runtime
        self.config = config
        self.member: Member | None = None

    @property
    def running(self) -> bool:
        m = self.member
        return m is not None and not m.node.failed.done()

    def start(self, timeout: float = 20.0) -> None:
        async def start() -> Member:
            member = Member(self.config)
            await member.start()
            return member

        self.member = self.runtime.run(start(), timeout)

    def stop(self, grace: float = 1.0, timeout: float = 20.0) -> None:
        stop_all([self], grace, timeout)


def stop_all(members: list[EmbeddedMember], grace: float = 1.0, timeout: float = 20.0) -> None:
    """Stop members together, so none spends its grace period calling the others."""
    running = [(e.runtime, e.member) for e in members if e.member is not None]
    for e in members:
        e.member = None
    if running:

        async def stop() -> None:
            await asyncio.gather(*(m.stop(grace) for _, m in running))

        running[0][0].run(stop(), timeout)
