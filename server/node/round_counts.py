"""What a member's write rounds cost in steps, counted where they happen: the driver's
turns, the Readies it carried out, the hand-offs to its storage thread (each one a
thread wake-up there and another back on the loop), and the Raft messages it sent and
received (each one an encode or a decode, and a wake-up of the member it goes to).
Times depend on the machine; these counts do not, so a benchmark divides them by its
operations and can hold a change to them. Plain integer increments on the driver's own
path: cheap enough to be always on.

Status reports them (`StatusResponse.round_counts`); `coord bench etcd` reads them around
each measurement, beside what /proc says of the process's context switches."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True)
class RoundCounts:
    """Totals since the member started."""

    driver_turns: int = 0  # wake-ups of the driver task (one per batch of inputs)
    readies: int = 0  # Readies carried out
    storage_handoffs: int = 0  # calls run in the storage thread
    inline_saves: int = 0  # Readies made durable on the loop's own thread
    store_writes: int = 0  # write transactions the Readies cost the store (node/persist.py)
    messages_sent: int = 0  # Raft messages handed to the peer transport
    messages_received: int = 0  # Raft messages the peer transport delivered

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class CountingExecutor(ThreadPoolExecutor):
    """The storage thread, counting what is handed to it in `counts.storage_handoffs`."""

    def __init__(self, counts: RoundCounts, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.counts = counts

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        self.counts.storage_handoffs += 1
        return super().submit(fn, *args, **kwargs)
