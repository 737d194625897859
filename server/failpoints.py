"""Named crash points inside a member (etcd's gofail failpoints), for crash and disk-fault
tests: a test or `coord chaos` starts a member with ``COORD_FAILPOINTS`` set, and the
member dies, stalls or fails a write at exactly that moment of its work.

Arming is by environment only (``COORD_FAILPOINTS="log-after-fsync=panic"``, several
separated by ``;``), read once when `coord serve` starts, so no flag, RPC or file can arm
a production member by accident. Unset, `hit` costs one dict lookup on an empty dict.

Actions:
- ``panic``: SIGKILL of the process itself (kill -9: nothing flushed, nothing said to
  peers), after one line on stderr naming the point, so a test can tell where it died;
- ``sleep(MS)``: block the calling thread MS milliseconds (a slow disk, a stalled step);
- ``error``: raise `FailpointError` (an OSError, EIO): a write that failed.

``ACTION@N`` fires from the point's N-th hit on (earlier hits pass), so a member can get
through its start-up before a point it passes at start-up fires.

The points are outside the state machine's apply: apply stays deterministic; a point
only decides when the process stops, never what a command does.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["ENV_VAR", "POINTS", "FailpointError", "arm", "arm_from_environment", "hit",
           "parse"]

ENV_VAR = "COORD_FAILPOINTS"

POINTS: Mapping[str, str] = {
    "log-before-fsync": "a write of the log is done but not committed (not yet fsync'd)",
    "log-after-fsync": "a write of the log is committed and fsync'd, nothing sent or "
                       "applied after it yet",
    "apply-before-answer": "a batch of entries is applied, the callers not yet answered",
    "snapshot-capture": "a snapshot's bytes are taken, the log not yet compacted to it",
    "snapshot-compact": "the log was compacted on disk to a snapshot just taken",
    "snapshot-send": "a leader has just written (part of) a snapshot to a follower",
    "snapshot-install": "a follower stored a leader's snapshot, its state machine not "
                        "yet replaced by it",
    "membership-change": "a committed membership change is about to be applied",
    "defrag": "the store was VACUUMed, its write-ahead log not yet truncated",
}
"""Every point a member passes, and the moment it marks."""


class FailpointError(OSError):
    """An injected I/O failure (`error`): to the code that meets it, a failed write."""


@dataclass(slots=True)
class _Armed:
    point: str
    action: Callable[[str], None]
    from_hit: int = 1
    hits: int = 0

    def fire(self) -> None:
        self.hits += 1
        if self.hits >= self.from_hit:
            self.action(self.point)


_ARMED: dict[str, _Armed] = {}


def hit(point: str) -> None:
    """Pass the named point: nothing unless it is armed (one dict lookup)."""
    armed = _ARMED.get(point)
    if armed is not None:
        armed.fire()


def _say(point: str, what: str) -> None:
    # os.write: unbuffered, so the line is out before a SIGKILL.
    os.write(sys.stderr.fileno(), f"failpoint {point}: {what}\n".encode())


def _panic(point: str) -> None:
    _say(point, "panic (kill -9 of this member)")
    os.kill(os.getpid(), signal.SIGKILL)


def _error(point: str) -> None:
    _say(point, "error (an injected I/O failure)")
    raise FailpointError(errno.EIO, f"injected I/O failure at failpoint {point}")


def _sleeper(ms: int) -> Callable[[str], None]:
    def sleep(point: str) -> None:
        _say(point, f"sleep {ms} ms")  # so a test can tell it holds the member now
        time.sleep(ms / 1000)

    return sleep


_TERM = re.compile(r"^(?P<action>panic|error|sleep\((?P<ms>\d+)\))(?:@(?P<hit>[1-9]\d*))?$")


def parse(spec: str) -> dict[str, tuple[str, int, int]]:
    """``"a=panic;b=sleep(50)@3"`` -> {point: (action, sleep ms, from hit)}; ValueError
    naming the term for an unknown point or action."""
    out: dict[str, tuple[str, int, int]] = {}
    for term in filter(None, (t.strip() for t in spec.split(";"))):
        point, eq, action = (s.strip() for s in term.partition("="))
        if point not in POINTS:
            raise ValueError(f"{ENV_VAR}: no failpoint {point!r} (known: "
                             f"{', '.join(POINTS)})")
        m = _TERM.match(action) if eq else None
        if m is None:
            raise ValueError(f"{ENV_VAR}: {term!r}: expected {point}=panic, error or "
                             "sleep(MS), optionally @N (from the N-th hit on)")
        out[point] = (m["action"].partition("(")[0], int(m["ms"] or 0), int(m["hit"] or 1))
    return out


def arm(spec: str) -> list[str]:
    """Arm the points of `spec` (`parse`'s syntax), disarming all others; the armed
    points, in order."""
    parsed = parse(spec)
    _ARMED.clear()
    for point, (action, ms, from_hit) in parsed.items():
        do = {"panic": _panic, "error": _error}.get(action) or _sleeper(ms)
        _ARMED[point] = _Armed(point, do, from_hit)
    return list(_ARMED)


def arm_from_environment(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Arm what ``COORD_FAILPOINTS`` names (nothing when unset): `coord serve` calls it
    once at start-up."""
    return arm(environ.get(ENV_VAR, ""))
