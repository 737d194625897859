"""Reads that promised no recency, checked for what they do promise.

A serializable read (etcd's `serializable=true`: the member answers from its own state,
no ReadIndex) and a read a member in read-only mode answered (flagged `read_only`) may
return an old value: they are left out of the linearizability check. What they may not
return is a value the key never held: one no write or cas on that key sent, one only a
write that definitely failed sent (a cas whose compare failed, a refused put), or one
from the future (every write that sent it began after the read had completed).

Rows: a read `ok` row flagged `"serializable": true` or `"read_only": true`, its
`value` what it read (None: absent, which the key was before its first write, so
always allowed). Values are unique per write, as in every register workload."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coord.check.linearizable import frozen, promised_no_recency
from coord.check.oplog import Op, pair
from coord.check.result import CheckResult


def _written(op: Op) -> Any:
    """The value a write or cas sent (a cas's new value)."""
    v = op.invoke.get("value")
    return frozen(v[1] if op.f == "cas" else v)


def check_stale_reads(rows: Iterable[dict[str, Any]]) -> CheckResult:
    res = CheckResult("stale-reads")
    ops = pair(r for r in rows if r.get("f") in ("read", "write", "cas"))
    writes: dict[tuple[str, Any], list[Op]] = {}  # (key, value) -> the ops that sent it
    acknowledged: dict[str, list[Op]] = {}  # key -> its writes that were acknowledged
    for op in ops:
        if op.f != "read":
            key = op.invoke.get("key")
            writes.setdefault((key, _written(op)), []).append(op)
            if op.status == "ok":
                acknowledged.setdefault(key, []).append(op)
    reads = stale = 0
    for op in ops:
        if op.f != "read" or op.status != "ok" or not promised_no_recency(op):
            continue
        reads += 1
        key, value = op.invoke.get("key"), frozen(op.completion.get("value"))
        if value is None:
            continue
        sent = writes.get((key, value), [])
        could = [w for w in sent if w.status != "fail"]
        if not could:
            why = "no write sent" if not sent else "only a write that failed sent"
            res.violation(f"key {key!r}: a read that promised no recency returned "
                          f"{value!r}, which {why}", key=key, ops=[op.rows()])
        elif all(w.start > op.end for w in could):
            res.violation(f"key {key!r}: a read that promised no recency returned "
                          f"{value!r}, from a write that began after the read completed",
                          key=key, ops=[op.rows(), *(w.rows() for w in could)])
        elif _overwritten_before(op, value, could, acknowledged.get(key, [])):
            stale += 1
    res.stats = {"reads": reads, "certainly_stale": stale}
    return res


def _overwritten_before(read: Op, value: Any, could: list[Op],
                        acknowledged: list[Op]) -> bool:
    """Did another acknowledged write on the key begin after the read value's write
    completed and complete before the read began (so the read was certainly stale)?"""
    done = min(w.end for w in could)
    return any(_written(w) != value and done < w.start and w.end < read.start
               for w in acknowledged)
