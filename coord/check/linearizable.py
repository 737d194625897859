"""Is one key's oplog linearizable as a register? The Wing–Gong search with Lowe's
memoisation (the algorithm of Knossos' `wgl` and Porcupine), for read, write and cas.

This is the one implementation of the per-key check: the chaos harness and the Spark
audit both call `check_key`. The search walks the oplog's call and return events in
time order, tries to linearize each pending call against the register, and backtracks
when it reaches the return of an op it has not linearized; a (set of linearized ops,
register value) pair it has seen before is never explored again. It is bounded in time
and in the number of such pairs, over the whole key: past either bound the verdict is
"unknown", never a guess.

A long key is searched in segments (coord.check.segments says where the cuts are and
why each reduction is sound): the search of one segment collects every configuration
(register value, unknown-outcome calls still unlinearized) it can end in with all its
known-outcome calls ordered, and the next segment starts from each of them. The whole
search pays for every unknown-outcome call as a doubling of the linearized sets it
can meet anywhere later; the segments pay only while a later op may still read its
value. The key is illegal when no configuration gets through a segment; that
segment's deepest point is the anomaly, in the whole search's shape.

Semantics of the rows (see coord.check.oplog):
- read ok: `value` is what was read (None/null: the key was absent). A read answered by
  a member in read-only mode carries `"read_only": true`, a serializable one (no
  ReadIndex, etcd's `serializable=true`) `"serializable": true`: it promised no recency
  (it may be stale by contract), so it is left out (coord.check.stale_reads checks it).
- write: `value` was written. cas: `value` is [old, new]; ok means it swapped; a cas
  that did not swap is a "fail" and did nothing.
- fail: the op did not take effect. info, or no completion: it may have taken effect at
  any time after its invoke, or never (a read with an unknown outcome says nothing and
  is left out).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coord.check.oplog import INFINITY, Op, OplogError, pair
from coord.check.segments import NEVER, forget_times, maximal, segments

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_MAX_STATES = 2_000_000
MAX_CONFIGS = 20_000
"""At a cut, the most (value, pending unknown-outcome calls) configurations the next
segment is searched from; past it the verdict is "unknown"."""

FUNCTIONS = ("read", "write", "cas", "add")
"""What the register model reads: `add` (a put to a fresh key, the set workload's) is a
write. Rows of other functions that share a key (a producer key's `init_producer`, a
prefix's `read_all`) are not register ops: check_key skips them and counts them."""

ABSENT = None

NO_RECENCY = ("serializable", "read_only")
"""A read's completion flags that say it promised no recency."""


@dataclass
class LinearizabilityResult:
    """`verdict`: "ok" (linearizable), "illegal" (it is not: `anomaly` says where), or
    "unknown" (a bound was hit first: `reason` says which). `ok` is True only for "ok"."""

    verdict: str
    ok: bool
    anomaly: dict[str, Any] | None = None
    reason: str = ""
    ops: int = 0
    skipped: int = 0  # rows of functions the register model does not read
    states: int = 0
    elapsed_s: float = 0.0
    key: str | None = None


def frozen(value: Any) -> Any:
    """A hashable form of a JSON value (lists -> tuples, dicts -> sorted item tuples),
    so register values can be memoised."""
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    return value


@dataclass(slots=True)
class _Call:
    op: Op
    f: str
    arg: Any  # write: value; cas: (old, new)
    out: Any  # read: value read
    id: int = 0


def _step(state: Any, c: _Call) -> tuple[bool, Any]:
    if c.f == "read":
        return state == c.out, state
    if c.f == "write":
        return True, c.arg
    old, new = c.arg
    return (True, new) if state == old else (False, state)


def promised_no_recency(op: Op) -> bool:
    return op.completion is not None and any(op.completion.get(f) for f in NO_RECENCY)


def _calls(ops: Sequence[Op]) -> list[_Call]:
    """The ops that matter to the search, with their register arguments."""
    calls = []
    for op in ops:
        f = "write" if op.f == "add" else op.f
        if op.status == "fail":
            continue
        if f == "read":
            if op.status != "ok" or promised_no_recency(op):
                continue
            calls.append(_Call(op, f, None, frozen(op.completion.get("value"))))
        elif f == "write":
            calls.append(_Call(op, f, frozen(op.invoke.get("value")), None))
        else:
            arg = op.invoke.get("value")
            if not isinstance(arg, list | tuple) or len(arg) != 2:
                raise OplogError(f"op {op.invoke.get('index')}: cas value must be "
                                   f"[old, new], got {arg!r}")
            calls.append(_Call(op, f, (frozen(arg[0]), frozen(arg[1])), None))
    return calls


def check_key(ops: list[dict], *, initial: Any = ABSENT,
              time_limit_s: float = DEFAULT_TIME_LIMIT_S,
              max_states: int = DEFAULT_MAX_STATES, split: bool = True) -> LinearizabilityResult:
    """Check the JSONL rows of one key (invokes and completions, any order of processes,
    in the order they were recorded). `initial` is the register's value before the
    oplog (absent by default). Bounded by `time_limit_s` and `max_states` memoised
    (linearized-set, value) pairs over the whole key; past either, the verdict is
    "unknown". `split` searches the key's segments one after another (the verdict is
    the same; see coord.check.segments); without it, the whole history in one search."""
    t0 = time.monotonic()
    key = next((r.get("key") for r in ops if r.get("key") is not None), None)
    mine = [r for r in ops if r.get("f") in FUNCTIONS]
    paired = pair(sorted(mine, key=lambda r: (r.get("time_ns", 0), r.get("index", 0))))
    calls = _calls(paired)
    bounds = _Bounds(t0, time_limit_s, max_states)
    if split:
        result = _search_segments(calls, frozen(initial), bounds)
    else:
        result = _search_whole(calls, frozen(initial), bounds)
    if result.anomaly is not None:
        _name_the_writer(result.anomaly, paired)
    result.key = key
    result.skipped = len(ops) - len(mine)
    result.ops = len(calls)
    result.elapsed_s = time.monotonic() - t0
    return result


@dataclass
class _Bounds:
    """The key's bounds, shared by the searches of its segments."""

    t0: float
    time_limit_s: float
    max_states: int
    states: int = 0  # memoised pairs of the segments searched so far

    def unknown(self, what: str, linearized: int, n: int) -> LinearizabilityResult:
        return LinearizabilityResult(
            "unknown", False, reason=f"{what} (linearized {linearized} of {n} ops at best)",
            states=self.states)


@dataclass
class _Outcome:
    """What one search reached: every (value, linearized bitmask) at which all its
    known-outcome calls were ordered (only the first when it was asked for one), the
    deepest failing point (depth, value, blocked call) and, past a bound, why it
    stopped."""

    ends: list[tuple[Any, int]]
    best: tuple[int, Any, int] | None
    deepest: int
    stopped: str = ""


def _search_whole(calls: list[_Call], initial: Any, bounds: _Bounds) -> LinearizabilityResult:
    out = _search(calls, 0, [(initial, 0)], bounds, first_only=True)
    if out.stopped:
        return bounds.unknown(out.stopped, max(out.deepest, 0), len(calls))
    if out.ends:
        return LinearizabilityResult("ok", True, states=bounds.states)
    return _illegal(calls, out.best, bounds.states)


def _search_segments(calls: list[_Call], initial: Any,
                     bounds: _Bounds) -> LinearizabilityResult:
    """The key's segments in time order, each searched from every configuration (value,
    pending unknown-outcome calls) the one before it could end in; illegal at the first
    segment no configuration gets through (its anomaly is that segment's).

    What it costs: a segment before the last is searched to the end (every end it can
    reach, not the first), so k mutually concurrent ops in one segment cost up to about
    k * 2^(k-1) states where the whole search may find one order at once. Segments are
    as concurrent as the clients that share a key; past the bounds the verdict is
    "unknown" as before, and `split=False` is the whole search."""
    for i, c in enumerate(calls):
        c.id = i
    forget = forget_times(calls)
    parts = segments(calls)
    configs: list[tuple[Any, int]] = [(initial, 0)]  # pending: a bitmask over call ids
    done = 0  # known-outcome calls of the segments before
    for k, seg in enumerate(parts):
        carried = [calls[g] for g in _bits(_union(p for _, p in configs))]
        new = [u for u in seg.unknown if forget[u.id] != NEVER]
        local = carried + seg.known + new
        starts = [(value, sum(1 << j for j, c in enumerate(carried)
                              if not pending >> c.id & 1)) for value, pending in configs]
        out = _search(local, len(carried), starts, bounds, first_only=k == len(parts) - 1)
        if out.stopped:
            return bounds.unknown(out.stopped, done + max(out.deepest, 0), len(calls))
        if not out.ends:
            return _illegal(local, out.best, bounds.states, done, len(calls))
        configs = maximal(
            (value, _union(1 << c.id for j, c in enumerate(local) if c.op.end == INFINITY
                           and not lin >> j & 1 and forget[c.id] > seg.end))
            for value, lin in out.ends)
        if len(configs) > MAX_CONFIGS:
            return bounds.unknown(f"configuration bound {MAX_CONFIGS} reached at a cut "
                                  f"after {bounds.states} states", done, len(calls))
        done += len(seg.known)
    return LinearizabilityResult("ok", True, states=bounds.states)


def _union(masks: Any) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _search(calls: list[_Call], n_carried: int, starts: list[tuple[Any, int]],
            bounds: _Bounds, first_only: bool) -> _Outcome:
    """The Wing–Gong search over `calls` from each start (value, bitmask of calls taken
    as already linearized), one memo for all starts: a (linearized, value) pair has the
    same future whichever start reached it. The first `n_carried` calls are carried
    across a cut: invoked before everything here."""
    n = len(calls)
    # Events: (time, kind, call id); kind 0 = call, 1 = return. At equal times calls
    # come first, so ops that touch are treated as concurrent (the permissive reading).
    events: list[tuple[float, int, int]] = []
    for i, c in enumerate(calls):
        events.append((-INFINITY if i < n_carried else c.op.start, 0, i))
        events.append((c.op.end, 1, i))
    events.sort()
    # A doubly linked list over the events; node 0 is the head sentinel.
    m = len(events)
    nxt = list(range(1, m + 2))
    prv = list(range(-1, m))
    kind = [0] + [e[1] for e in events]
    cid = [-1] + [e[2] for e in events]
    ret_node = [0] * n
    call_node = [0] * n
    for pos, (_, k, i) in enumerate(events, 1):
        if k == 0:
            call_node[i] = pos
        else:
            ret_node[i] = pos
    end = m + 1  # tail sentinel (nxt of the last node)
    known = [c.op.end != INFINITY for c in calls]

    def lift(i: int) -> None:
        for node in (call_node[i], ret_node[i]):
            nxt[prv[node]] = nxt[node]
            if nxt[node] != end:
                prv[nxt[node]] = prv[node]

    def unlift(i: int) -> None:
        for node in (ret_node[i], call_node[i]):
            if nxt[node] != end:
                prv[nxt[node]] = node
            nxt[prv[node]] = node

    cache: set[tuple[int, Any]] = set()
    out = _Outcome([], None, -1)
    steps = 0
    for start_state, pre in starts:
        taken = _bits(pre)
        for i in taken:
            lift(i)
        stack: list[tuple[int, Any]] = []  # (call id, state before it)
        linearized, state, node = pre, start_state, nxt[0]
        left = sum(known) - sum(known[i] for i in taken)
        while True:
            steps += 1
            if steps & 0x3FF == 0 and time.monotonic() - bounds.t0 > bounds.time_limit_s:
                out.stopped = (f"time limit {bounds.time_limit_s:g} s reached after "
                               f"{bounds.states + len(cache)} states")
                bounds.states += len(cache)
                return out
            if left and kind[node] == 0:
                i = cid[node]
                ok, new_state = _step(state, calls[i])
                memo = (linearized | (1 << i), new_state)
                if ok and memo not in cache:
                    cache.add(memo)
                    if bounds.states + len(cache) > bounds.max_states:
                        out.stopped = f"state bound {bounds.max_states} reached"
                        bounds.states += len(cache)
                        return out
                    stack.append((i, state))
                    state, linearized = new_state, memo[0]
                    left -= known[i]
                    lift(i)
                    node = nxt[0]
                    continue
                node = nxt[node]
                continue
            if left:
                # The return of an op not yet linearized: the current order cannot work.
                if len(stack) > out.deepest:
                    out.deepest = len(stack)
                    out.best = (out.deepest, state, cid[node])
            else:
                # Every known outcome ordered; the unknown ones left need never happen.
                out.ends.append((state, linearized))
                if first_only:
                    bounds.states += len(cache)
                    return out
            if not stack:
                break
            i, state = stack.pop()
            linearized &= ~(1 << i)
            left += known[i]
            unlift(i)
            node = nxt[call_node[i]]
        for i in reversed(taken):
            unlift(i)
    bounds.states += len(cache)
    return out


def _illegal(calls: list[_Call], best: tuple[int, Any, int] | None, states: int,
             before: int = 0, total: int | None = None) -> LinearizabilityResult:
    """The smallest failing window we can name: the op whose return no order reached
    with the register in a state it accepts, the ops concurrent with it, and the value
    the register held at the deepest point of the search."""
    assert best is not None
    depth, state, blocked = best
    depth += before  # the ops of the segments before this search's
    b = calls[blocked]
    window = [c for c in calls
              if c.op.start <= b.op.end and c.op.end >= b.op.start and c is not b]
    describe = _describe(b)
    message = (f"{describe} cannot be linearized: at best {depth} of "
               f"{len(calls) if total is None else total} ops "
               f"ordered, the register then held {_show(state)}; "
               f"{len(window)} op(s) concurrent with it")
    anomaly = {
        "message": message,
        "op": b.op.rows(),
        "state": state,
        "concurrent": [c.op.rows() for c in window],
        "linearized": depth,
    }
    return LinearizabilityResult("illegal", False, anomaly=anomaly, states=states)


def _name_the_writer(anomaly: dict[str, Any], ops: list[Op]) -> None:
    """For a read that cannot be linearized: every op that wrote the value it read,
    whatever its recorded outcome (a write recorded as failed whose value is read back
    points at a wrong "not applied" answer)."""
    read = anomaly["op"][-1]
    if read.get("f") != "read":
        return
    value = frozen(read.get("value"))
    writers = []
    for op in ops:
        v = frozen(op.invoke.get("value"))
        wrote = v if op.f in ("write", "add") else (v[1] if op.f == "cas" and v else None)
        if op.f != "read" and wrote == value and value is not None:
            writers.append(op)
    anomaly["written_by"] = [w.rows() for w in writers]
    if writers:
        anomaly["message"] += "; the value was written by " + ", ".join(
            f"{w.f} op {w.invoke.get('index')} (recorded {w.status}{_error_of(w)})"
            for w in writers)
    elif value is not None:
        anomaly["message"] += "; nothing in the oplog wrote that value"


def _error_of(op: Op) -> str:
    error = op.completion.get("error") if op.completion else None
    return f": {error}" if error else ""


def _describe(c: _Call) -> str:
    idx = c.op.invoke.get("index")
    proc = c.op.process
    if c.f == "read":
        return f"read of {_show(c.out)} (op {idx}, process {proc})"
    if c.f == "write":
        return f"write of {_show(c.arg)} (op {idx}, process {proc})"
    return f"cas {_show(c.arg[0])} -> {_show(c.arg[1])} (op {idx}, process {proc})"


def _show(value: Any) -> str:
    return "absent" if value is None else repr(value)
