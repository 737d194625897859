"""When the next ReadIndex round may start: the read convoy.

A linearizable read waits for a round of heartbeats that a quorum answers. Reads share a
round when they wait at the same time, and the driver starts one round for every read
waiting (`Reads.maybe_start_round`). But unary calls reach the event loop one at a
time, through the gRPC core's thread, and on this machine a round ended before the next
call arrived: at 16 and 64 clients of the etcd API a round carried 1.1 reads, each paid
its own heartbeats (about 170 µs of the leader's CPU and 65 µs of each follower's), and
linearizable gets ran at half the rate of serializable ones.

So once a round has been shared, the next one waits for as many reads as the last one
carried, and no longer than `window` after its first read arrived. Callers that come
back together (their answers went out together) form a convoy and keep sharing; a round
that reaches the window carries fewer reads, and the one after waits for that many. A
lone caller is never held: its rounds carry one read, so the next waits for one. The
price is at most `window` on a read after a shared round, and only when fewer callers
come back than last time.

The window is 2 ms (`NodeOptions.read_convoy_ms`): a shorter one let convoys break up
more often (linearizable gets at 16 clients, 6 s runs: about 3,700 a second with 0.5 ms,
4,800 with 1 ms and 5,600 with 2 ms; at 64, about 4,500 with 1 ms and 6,300 with 2 ms).
Measured with the rule off and on, alternated, two pairs of 6 s runs (etcd-API
linearizable gets from the bench's driver to the leader of three members): at 16
clients about 2,900 gets/s before and 5,400 after; at 64, 3,000 before and 4,700-5,600
after; at 4, 2,600 before and 2,900-3,200 after, p50 lower too; one client about 1,280
before and 1,350 after (p50 0.72-0.78 ms throughout). The leader's CPU per get at 16
clients went from about 335 µs to 195 µs, a follower's from about 68 µs to 16 µs.

Pure: the driver passes the time and arms the timer.
"""

from __future__ import annotations

__all__ = ["ReadConvoy"]


class ReadConvoy:
    """Says whether the next round starts now or is held, and until when."""

    __slots__ = ("window", "_size", "_first_at")

    def __init__(self, window: float) -> None:
        """`window`: the longest a round waits for its convoy, in seconds (0: never)."""
        if window < 0:
            raise ValueError("window must not be negative")
        self.window = window
        self._size = 1  # reads the last round carried
        self._first_at = 0.0  # when the first read now waiting arrived

    def arrived(self, now: float) -> None:
        """A read arrived and none was waiting: the next round's first read."""
        self._first_at = now

    def hold_until(self, waiting: int, now: float) -> float | None:
        """None if a round for the `waiting` reads starts now; else when it must start
        even if no other read has come."""
        if waiting >= self._size or self.window == 0:
            return None
        due = self._first_at + self.window
        return due if now < due else None

    def started(self, reads: int) -> None:
        """A round started for `reads` reads."""
        self._size = max(1, reads)
