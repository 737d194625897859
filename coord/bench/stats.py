"""The statistics every benchmark reports, computed one way: percentiles of latencies,
medians and maxima of trials (with the trials that observed nothing counted, not
dropped), and ratios of medians."""

from __future__ import annotations

import statistics


def percentile(sorted_values: list[float], q: float) -> float:
    """The `q` quantile (0..1) of already-sorted values, nearest rank; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def latency_ms(latencies: list[float]) -> dict[str, float]:
    """p50 and p99 in milliseconds of latencies in seconds (sorted here, in place)."""
    latencies.sort()
    return {
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def summarize(values: list[float | None]) -> dict[str, float | int | None]:
    """n, median and max of the observed values (None = not observed, left out and
    counted as `missing` so a failed trial is visible rather than silently dropped)."""
    seen = [v for v in values if v is not None]
    return {
        "n": len(seen),
        "missing": len(values) - len(seen),
        "median": statistics.median(seen) if seen else None,
        "max": max(seen) if seen else None,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is not a positive number (a ratio of
    medians only means something for positive durations)."""
    if a is None or b is None or b <= 0 or a < 0:
        return None
    return a / b
