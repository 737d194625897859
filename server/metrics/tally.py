"""A histogram's counts kept as plain numbers, for observations made on one thread at a
time (the event loop, or the store's writer under its lock): prometheus_client's
Histogram takes a lock per observation and walks its buckets one by one, which the gRPC
path would pay on every call. The exposition is still prometheus_client's
(`HistogramMetricFamily`, in `family`)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from prometheus_client.core import HistogramMetricFamily

ETCD_DISK_BUCKETS: tuple[float, ...] = tuple(0.001 * 2 ** i for i in range(14))
"""etcd's buckets for its disk histograms (WAL fsync, backend commit): 1 ms to 8.192 s."""
GRPC_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""prometheus_client's (and go-grpc-prometheus's) default buckets, in seconds."""
SNAPSHOT_BUCKETS: tuple[float, ...] = tuple(0.01 * 2 ** i for i in range(14))
"""Snapshots take from milliseconds (a few keys) to tens of seconds (millions)."""
BATCH_BUCKETS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Operations to a pipelined-stream message (at most coord.tagged_calls.MAX_BATCH)."""


class Tally:
    """Bucket counts and a sum. `observe` is not thread-safe: one thread observes at a
    time (a scrape on another thread may read a count one observation behind the sum)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs, +Inf last, as the exposition wants them."""
        out, running = [], 0
        for bound, n in zip((*map(repr, map(float, self.bounds)), "+Inf"), self.counts,
                            strict=True):
            running += n
            out.append((bound, running))
        return out


def family(name: str, doc: str, labelled: Iterable[tuple[Sequence[str], Tally]],
           labels: Sequence[str] = ()) -> HistogramMetricFamily:
    """One histogram metric with a sample set per (label values, tally)."""
    fam = HistogramMetricFamily(name, doc, labels=list(labels))
    for values, tally in labelled:
        fam.add_metric(list(values), tally.buckets(), tally.total)
    return fam
