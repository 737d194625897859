"""Where one key's history can be cut into independent segments, and which carried
unknown-outcome calls may be forgotten at a cut (for coord.check.linearizable).

A cut point T is a time at which every call with a known outcome either returned
before T or was invoked after T. In any linearization every call of the first kind is
ordered before every call of the second, so the search can stop at T and go on from
the configurations it can reach there: (register value, the unknown-outcome calls not
yet linearized). Those calls (info / no completion: they may take effect at any time
after their invoke, or never) never return, so they never prevent a cut; they are
carried across it as still pending. Cuts are made only where the last return before T
is strictly earlier than the first invoke after it: the search treats ops that touch
as concurrent, and so does the cut.

Forgetting a carried call u that writes v (a write of v, or a cas to v) is sound once
no call that could be ordered after u *observes* v, i.e. reads v (a known-outcome
read of v) or swaps from it (a cas whose old value is v). Take any linearization that
orders u after such a point; the op right after u runs in state v, so it is not a read
of v or a cas from v (none is left), and a cas from another value would not succeed:
it is a write, which does not look at the state. Removing u therefore leaves every
other op's state unchanged, and an unknown-outcome call may never take effect. So a
configuration that still holds u can complete if and only if the same configuration
without u can. This needs no uniqueness of written values (a delete's absence is
written by many ops and the argument still holds); an unknown-outcome cas from v,
which can be ordered after u at any time, keeps u for good.

A configuration (value, P) also covers (value, P') for every P' within P: from the
first, the calls of P outside P' can simply never take effect. Only the maximal pending
sets of each value are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coord.check.oplog import INFINITY

if TYPE_CHECKING:
    from coord.check.linearizable import _Call

NEVER = -INFINITY
"""The forget time of a call no later op observes: it can be left out altogether."""


@dataclass
class Segment:
    """The known-outcome calls between two cuts, the unknown-outcome calls first
    invoked before this segment's last return (and after the previous one's), and the
    time of that last return."""

    known: list[_Call] = field(default_factory=list)
    unknown: list[_Call] = field(default_factory=list)
    end: float = NEVER


def segments(calls: Sequence[_Call]) -> list[Segment]:
    """The key's calls cut at every cut point, in time order. Unknown-outcome calls
    invoked after the last known return can affect no known op and are left out."""
    known = sorted((c for c in calls if c.op.end != INFINITY), key=lambda c: c.op.start)
    out: list[Segment] = []
    for c in known:
        if not out or c.op.start > out[-1].end:
            out.append(Segment())
        seg = out[-1]
        seg.known.append(c)
        seg.end = max(seg.end, c.op.end)
    ends = [s.end for s in out]
    for c in sorted((c for c in calls if c.op.end == INFINITY), key=lambda c: c.op.start):
        j = _first_at_or_after(ends, c.op.start)
        if j < len(out):
            out[j].unknown.append(c)
    return out


def _first_at_or_after(ends: list[float], t: float) -> int:
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi) // 2
        if ends[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def written(c: _Call) -> Any:
    """The value a write or cas leaves in the register."""
    return c.arg if c.f == "write" else c.arg[1]


def forget_times(calls: Sequence[_Call]) -> dict[int, float]:
    """For each unknown-outcome call (by `id`): the last return of a known-outcome call
    that observes its written value and could be ordered after it (NEVER when there is
    none: it is left out from the start), or INFINITY when another unknown-outcome cas
    swaps from that value (it is never forgotten)."""
    seen_until: dict[Any, list[float]] = {}
    unknown_swaps: dict[Any, set[int]] = {}
    for c in calls:
        if c.f == "write":
            continue
        seen = c.out if c.f == "read" else c.arg[0]
        if c.op.end == INFINITY:
            unknown_swaps.setdefault(seen, set()).add(c.id)
        else:
            seen_until.setdefault(seen, []).append(c.op.end)
    out: dict[int, float] = {}
    for c in calls:
        if c.op.end != INFINITY:
            continue
        v = written(c)
        if unknown_swaps.get(v, set()) - {c.id}:
            out[c.id] = INFINITY
        else:
            out[c.id] = max((e for e in seen_until.get(v, ()) if e >= c.op.start),
                            default=NEVER)
    return out


def maximal(configs: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """Of (value, pending bitmask) configurations, those whose pending set is not
    inside another's of the same value (see the module's docstring)."""
    by_value: dict[Any, list[int]] = {}
    for value, pending in set(configs):
        by_value.setdefault(value, []).append(pending)
    out: list[tuple[Any, int]] = []
    for value, sets in by_value.items():
        kept: list[int] = []
        for p in sorted(sets, key=lambda s: -s.bit_count()):
            if not any(p & ~k == 0 for k in kept):
                kept.append(p)
        out.extend((value, p) for p in kept)
    return out
