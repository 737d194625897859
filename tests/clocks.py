"""A clock the test moves, for code that takes a clock (call it) or reads the `time`
module (monkeypatch the module's `time` with it: `monotonic` is the test's, the rest of
`time` is the real one)."""

from __future__ import annotations

import time


class FakeClock:
    """A monotonic clock that stands still until the test sets `now`."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    monotonic = __call__

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)
