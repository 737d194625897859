"""The threads of the sync facade: the client's event loop, and its callback runner.

`LoopThread` runs one asyncio loop on a daemon thread; the sync `Client` submits each
call's coroutine to it and blocks until it finishes, so many application threads can
share one client. `CallbackThread` runs the application's callbacks (`on_severed`,
`on_event`, mode listeners) one at a time, in order, off the loop: a callback that is
slow or blocks must not hold up keepalives, and may itself call the client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["CallbackThread", "LoopClosed", "LoopThread"]

log = logging.getLogger("coord.client")

T = TypeVar("T")


class LoopClosed(RuntimeError):
    """The loop thread was stopped (its client is closed)."""


class LoopThread:
    """An asyncio event loop on a daemon thread of its own, started on first use (a
    client made and never used, or inherited by a forked child that never uses it,
    costs no thread)."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()  # orders submissions before stop()
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _start(self) -> None:
        """Start the thread if it is not running yet (hold `_lock`)."""
        if self._thread.ident is None:
            self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            try:
                self._cancel_remaining()
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                self._loop.close()

    def _cancel_remaining(self) -> None:
        """What still runs at stop (a blocked stream read, a session's task) is
        cancelled and awaited, so every waiting thread is woken (with CancelledError)."""
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        if tasks:
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; LoopClosed if the loop was stopped."""
        with self._lock:
            if self._stopping:
                coro.close()  # never started: no "never awaited" warning
                raise LoopClosed("the client's loop is stopped")
            self._start()
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and wait for its result (or exception). An interrupt
        while waiting (Ctrl-C) cancels it."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError("a sync client call from its own event loop would deadlock")
        future = self.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the loop (dropped once the loop is stopped)."""
        with self._lock:
            if not self._stopping:
                self._start()
                self._loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop: what is still running is cancelled; the thread ends."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            if self._thread.ident is None:  # never used
                self._loop.close()
                return
            self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_loop_thread():
            self._thread.join(timeout)


_STOP = object()


class CallbackThread:
    """Runs callbacks one at a time, in submission order, on a daemon thread started on
    first use. A callback's exception is logged (with `what`) and the next one runs."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any, what: str = "callback") -> bool:
        """Queue `fn(*args)`; False (and dropped) once the runner is closed."""
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name=self._name,
                                                daemon=True)
                self._thread.start()
            self._queue.put((fn, args, what))
        return True

    def _main(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            fn, args, what = item
            try:
                fn(*args)
            except Exception:
                log.exception("coord: %s failed", what)

    def close(self, timeout: float) -> None:
        """Run what was submitted, then end the thread; waits up to `timeout` seconds
        (not at all from a callback: it would wait for itself)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        if thread is not threading.current_thread():
            thread.join(timeout)
