"""A test build of `coord serve` whose wall clock is off: the chaos harness runs a
member as `python -m coord.chaos.skewed_member --skew-ms N <serve flags>` (a fixed
skew) or `--skew-file PATH <serve flags>` (the skew, in ms, is what PATH holds, re-read
while the member runs: the skew nemesis moves every member's clock at once and puts it
back, and a member restarted meanwhile keeps its machine's skew), to show what members'
wall clocks do and do not decide. Only the wall clock (time.time, time.time_ns: what a
leader stamps on the commands it proposes) moves; the monotonic clock that times
elections, heartbeats and session deadlines does not."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path

from coord.chaos.skew_file import read_skew

POLL_S = 0.05
"""How often a member running with --skew-file looks for a new skew."""

_skew_ns = 0
_real_ns, _real_s = time.time_ns, time.time


def skew_wall_clock(skew_ms: int) -> None:
    """This process's wall clock runs `skew_ms` off the real one from now on."""
    global _skew_ns
    _skew_ns = skew_ms * 1_000_000
    time.time_ns = lambda: _real_ns() + _skew_ns
    time.time = lambda: _real_s() + _skew_ns / 1e9


def follow(path: Path, stop: threading.Event) -> None:
    """Apply the skew in `path` whenever it changes, until `stop` (a member: never)."""
    seen = None
    while True:
        with contextlib.suppress(FileNotFoundError):
            stamp = path.stat().st_mtime_ns
            if stamp != seen:
                seen = stamp
                skew_wall_clock(read_skew(path))
        if stop.wait(POLL_S):
            return


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] not in ("--skew-ms", "--skew-file"):
        print("usage: python -m coord.chaos.skewed_member (--skew-ms N | --skew-file PATH) "
              "<coord serve flags>", file=sys.stderr)
        return 2
    if argv[0] == "--skew-ms":
        skew_wall_clock(int(argv[1]))
    else:
        path = Path(argv[1])
        skew_wall_clock(read_skew(path))
        threading.Thread(target=follow, args=(path, threading.Event()), name="skew",
                         daemon=True).start()
    from coord.cli.main import main as coord_main

    return coord_main(["serve", *argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
