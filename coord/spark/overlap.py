"""Calls of coord that do not depend on each other, overlapped: the synchronous client
blocks its caller for each call, so two independent calls made one after the other wait
for two round trips; started together they wait for one (the client is thread-safe and
its loop has both in flight at once)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Started", "started"]

T = TypeVar("T")


class Started(Generic[T]):
    """A call running on a thread of its own; `result()` waits for it and gives what it
    returned, or raises what it raised."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._call = call
        self._result: T | None = None
        self._error: BaseException | None = None
        # A thread, not a pool: Spark forks its Python workers, and a pool made before a
        # fork has no threads in the child.
        self._thread = threading.Thread(target=self._run, name="coord-spark-overlap", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._call()
        except BaseException as e:  # handed to whoever waits for the result
            self._error = e

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


def started(call: Callable[[], T]) -> Started[T]:
    """Start `call` now, beside whatever the caller does next."""
    return Started(call)
