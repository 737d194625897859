"""A test build of `coord serve` whose wall clock is off by a fixed amount: the chaos
harness runs a member as `python -m coord.chaos.skewed_member --skew-ms N <serve
flags>` to show what members' wall clocks do and do not decide. Only the wall clock
(time.time, time.time_ns: what a leader stamps on the commands it proposes) moves;
the monotonic clock that times elections, heartbeats and session deadlines does not."""

from __future__ import annotations

import sys
import time


def skew_wall_clock(skew_ms: int) -> None:
    real_ns, real_s = time.time_ns, time.time
    time.time_ns = lambda: real_ns() + skew_ms * 1_000_000
    time.time = lambda: real_s() + skew_ms / 1000


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--skew-ms":
        print("usage: python -m coord.chaos.skewed_member --skew-ms N <coord serve flags>",
              file=sys.stderr)
        return 2
    skew_wall_clock(int(argv[1]))
    from coord.cli.main import main as coord_main

    return coord_main(["serve", *argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
