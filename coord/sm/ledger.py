"""The one cluster revision, and the events produced at it.

Every module records its changes through the same ledger, so a command that touches the
KV store, the ownership table and a session (a claim that severs a session holding
keys) still moves the revision exactly once, and all its events carry that revision.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from coord.sm.errors import CommandError

F = TypeVar("F", bound=Callable[..., Any])

INITIAL_REVISION = 1
"""The revision of an empty store, as in etcd, whose first write lands at revision 2:
etcd clients depend on it (concurrency.Election.Campaign waits for the keys created
before its own, bounded by its key's create revision - 1, and a bound of 0 means none)."""


class Ledger:
    def __init__(self) -> None:
        self.revision = INITIAL_REVISION  # the last committed revision
        self.changes = 0  # commands that changed state (not all moved `revision`: see mark)
        self._depth = 0
        self._dirty = False
        self._marked = False
        self._events: list[Any] = []

    def command(self) -> Ledger:
        """One command's scope (`with ledger.command():`); nested scopes join the
        outermost. On exit the revision moves by one iff something inside called `touch`.
        The ledger is its own context manager, not a generator's: every command on
        every member enters one, and a generator-based one cost 0.75 µs against 0.17."""
        return self

    def __enter__(self) -> None:
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and (self._dirty or self._marked):
            self.changes += 1
            self.revision += self._dirty
            self._dirty = self._marked = False

    def touch(self) -> int:
        """Declare a change in the current command; returns the revision it happens at."""
        if self._depth == 0:
            raise RuntimeError("state changes must happen inside Ledger.command()")
        self._dirty = True
        return self.revision + 1

    def mark(self) -> None:
        """Declare a change that does not move the revision, as in etcd, whose clients
        expect the revision to stay put: a compaction, a session opened (a lease grant),
        a session ended that held nothing (a revoke or expiry of a lease without keys).
        The command still counts as a change: its result is remembered for its request id."""
        if self._depth == 0:
            raise RuntimeError("state changes must happen inside Ledger.command()")
        self._marked = True

    @property
    def head(self) -> int:
        """The revision a reader inside the current command sees."""
        return self.revision + 1 if self._dirty else self.revision

    def emit(self, event: Any) -> None:
        self._events.append(event)

    def drain(self) -> list[Any]:
        events, self._events = self._events, []
        return events


def operation(result_type: type) -> Callable[[F], F]:
    """Run a public state-machine method as one command: inside the ledger's scope, with
    a refusal (`CommandError`, raised before any change) returned as a `result_type`."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            ledger: Ledger = self.ledger
            try:
                with ledger.command():
                    return fn(self, *args, **kwargs)
            except CommandError as exc:
                return result_type(
                    error=exc.code, message=exc.message, revision=ledger.revision, **exc.details
                )

        return run  # type: ignore[return-value]

    return wrap
