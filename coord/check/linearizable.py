"""Is one key's oplog linearizable as a register? The Wing–Gong search with Lowe's
memoisation (the algorithm of Knossos' `wgl` and Porcupine), for read, write and cas.

This is the one implementation of the per-key check: the chaos harness and the Spark
audit both call `check_key`. The search walks the oplog's call and return events in
time order, tries to linearize each pending call against the register, and backtracks
when it reaches the return of an op it has not linearized; a (set of linearized ops,
register value) pair it has seen before is never explored again. It is bounded in time
and in the number of such pairs: past either bound the verdict is "unknown", never a
guess.

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

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_MAX_STATES = 2_000_000

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
    ret_time: float = INFINITY


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
              max_states: int = DEFAULT_MAX_STATES) -> LinearizabilityResult:
    """Check the JSONL rows of one key (invokes and completions, any order of processes,
    in the order they were recorded). `initial` is the register's value before the
    oplog (absent by default). Bounded by `time_limit_s` and `max_states` memoised
    (linearized-set, value) pairs; past either, the verdict is "unknown"."""
    t0 = time.monotonic()
    key = next((r.get("key") for r in ops if r.get("key") is not None), None)
    mine = [r for r in ops if r.get("f") in FUNCTIONS]
    paired = pair(sorted(mine, key=lambda r: (r.get("time_ns", 0), r.get("index", 0))))
    calls = _calls(paired)
    result = _search(calls, frozen(initial), t0, time_limit_s, max_states)
    if result.anomaly is not None:
        _name_the_writer(result.anomaly, paired)
    result.key = key
    result.skipped = len(ops) - len(mine)
    result.ops = len(calls)
    result.elapsed_s = time.monotonic() - t0
    return result


def _search(calls: list[_Call], initial: Any, t0: float, time_limit_s: float,
            max_states: int) -> LinearizabilityResult:
    n = len(calls)
    if n == 0:
        return LinearizabilityResult("ok", True)
    # Events: (time, kind, call id); kind 0 = call, 1 = return. At equal times calls
    # come first, so ops that touch are treated as concurrent (the permissive reading).
    events: list[tuple[float, int, int]] = []
    for i, c in enumerate(calls):
        c.id = i
        c.ret_time = c.op.end
        events.append((c.op.start, 0, i))
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
    stack: list[tuple[int, Any]] = []  # (call id, state before it)
    linearized = 0
    state = initial
    node = nxt[0]
    deepest = -1
    best: tuple[int, Any, int] | None = None  # (depth, state, blocking call) at the deepest
    steps = 0
    while nxt[0] != end:
        steps += 1
        if steps & 0x3FF == 0 and time.monotonic() - t0 > time_limit_s:
            return LinearizabilityResult(
                "unknown", False, reason=f"time limit {time_limit_s:g} s reached after "
                f"{len(cache)} states (linearized {deepest + 1} of {n} ops at best)",
                states=len(cache))
        if kind[node] == 0:
            i = cid[node]
            ok, new_state = _step(state, calls[i])
            if ok:
                new_lin = linearized | (1 << i)
                memo = (new_lin, new_state)
                if memo not in cache:
                    cache.add(memo)
                    if len(cache) > max_states:
                        return LinearizabilityResult(
                            "unknown", False, reason=f"state bound {max_states} reached "
                            f"(linearized {deepest + 1} of {n} ops at best)",
                            states=len(cache))
                    stack.append((i, state))
                    state, linearized = new_state, new_lin
                    lift(i)
                    node = nxt[0]
                    continue
            node = nxt[node]
        else:
            if calls[cid[node]].ret_time == INFINITY:
                # Only ops with unknown outcomes remain: they need never have happened.
                break
            # The return of an op not yet linearized: the current order cannot work.
            if len(stack) > deepest:
                deepest = len(stack)
                best = (deepest, state, cid[node])
            if not stack:
                return _illegal(calls, best, len(cache))
            i, state = stack.pop()
            linearized &= ~(1 << i)
            unlift(i)
            node = nxt[call_node[i]]
    return LinearizabilityResult("ok", True, states=len(cache))


def _illegal(calls: list[_Call], best: tuple[int, Any, int] | None,
             states: int) -> LinearizabilityResult:
    """The smallest failing window we can name: the op whose return no order reached
    with the register in a state it accepts, the ops concurrent with it, and the value
    the register held at the deepest point of the search."""
    assert best is not None
    depth, state, blocked = best
    b = calls[blocked]
    window = [c for c in calls
              if c.op.start <= b.ret_time and c.ret_time >= b.op.start and c is not b]
    describe = _describe(b)
    message = (f"{describe} cannot be linearized: at best {depth} of {len(calls)} ops "
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
