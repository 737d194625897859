"""The checks of a KV request that need no state (etcd's `checkPutRequest`,
`checkTxnRequest`, `checkIntervals`, ...): types, limits, a txn's shape and op budget,
and a txn branch writing a key twice. A refusal is a `CommandError`, raised before the
store changes anything; the checks that look at the store (sessions exist, keys exist,
revisions are not compacted) are the store's own (`coord.sm.kv`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coord.sm import limits
from coord.sm.canonical_json import INT64_MAX
from coord.sm.commands import OPS, TARGETS, Compare, DeleteRange, Put, Range, Txn
from coord.sm.errors import INVALID_ARGUMENT, TOO_LARGE, CommandError

__all__ = ["check_bool", "check_compare", "check_delete", "check_int", "check_key",
           "check_put", "check_range", "check_range_end", "check_txn", "txn_write_conflict"]


def check_key(key: Any, what: str = "key") -> None:
    if type(key) is not bytes:
        raise CommandError(INVALID_ARGUMENT, f"{what} must be bytes")
    if not key:
        raise CommandError(INVALID_ARGUMENT, f"{what} must not be empty")
    if len(key) > limits.MAX_KEY_BYTES:
        raise CommandError(TOO_LARGE, f"{what} is {len(key)} bytes; the limit is "
                           f"{limits.MAX_KEY_BYTES}")


def check_range_end(range_end: Any) -> None:
    if type(range_end) is not bytes:
        raise CommandError(INVALID_ARGUMENT, "range_end must be bytes")
    if len(range_end) > limits.MAX_KEY_BYTES:
        raise CommandError(TOO_LARGE, "range_end is too long")


def check_int(v: Any, name: str, low: int = 0) -> None:
    if type(v) is not int or not low <= v <= INT64_MAX:
        raise CommandError(INVALID_ARGUMENT, f"{name} must be an int >= {low}, got {v!r:.40}")


def check_bool(v: Any, name: str) -> None:
    if type(v) is not bool:
        raise CommandError(INVALID_ARGUMENT, f"{name} must be a bool")


def check_put(op: Put) -> None:
    check_key(op.key)
    if type(op.value) is not bytes:
        raise CommandError(INVALID_ARGUMENT, "value must be bytes")
    if len(op.value) > limits.MAX_VALUE_BYTES:
        raise CommandError(TOO_LARGE, f"value is {len(op.value)} bytes; the limit is "
                           f"{limits.MAX_VALUE_BYTES}")
    # the three flags tested in one line (every put is checked), by name only if one is bad
    if not type(op.prev_kv) is type(op.ignore_value) is type(op.ignore_lease) is bool:
        check_bool(op.prev_kv, "prev_kv")
        check_bool(op.ignore_value, "ignore_value")
        check_bool(op.ignore_lease, "ignore_lease")
    if type(op.session_id) is not int:
        raise CommandError(INVALID_ARGUMENT, "session_id must be an int")
    if op.ignore_value and op.value:
        raise CommandError(INVALID_ARGUMENT, "value is provided with ignore_value")
    if op.ignore_lease and op.session_id:
        raise CommandError(INVALID_ARGUMENT, "session is provided with ignore_lease")


def check_delete(op: DeleteRange) -> None:
    check_key(op.key)
    check_range_end(op.range_end)
    check_bool(op.prev_kv, "prev_kv")


def check_range(op: Range) -> None:
    check_key(op.key)
    check_range_end(op.range_end)
    check_int(op.limit, "limit")
    check_int(op.revision, "revision")


def check_compare(cmp: Any) -> None:
    if type(cmp) is not Compare:
        raise CommandError(INVALID_ARGUMENT, "compares must be Compare records")
    check_key(cmp.key, "compare key")
    if cmp.target not in TARGETS or cmp.op not in OPS:
        raise CommandError(INVALID_ARGUMENT, f"bad compare {cmp.target!r:.20} "
                           f"{cmp.op!r:.10}: targets {sorted(TARGETS)}, ops {sorted(OPS)}")
    if type(cmp.value) is not bytes or len(cmp.value) > limits.MAX_VALUE_BYTES:
        raise CommandError(INVALID_ARGUMENT, "compare value must be bytes within limits")
    check_int(cmp.number, "compare number")
    check_range_end(cmp.range_end)


def check_txn(compares: Any, success: Any, failure: Any, budget: int) -> None:
    """Shape and types, both branches, nested txns too. etcd's op budget: the longest
    of a level's three lists counts against it, and what is left is the budget of
    the txns nested in that level (so nesting is bounded too)."""
    for name, seq in (("compares", compares), ("success", success), ("failure", failure)):
        if not isinstance(seq, (list, tuple)):
            raise CommandError(INVALID_ARGUMENT, f"{name} must be a sequence")
    ops = max(len(compares), len(success), len(failure))
    if ops > budget:
        raise CommandError(TOO_LARGE, f"too many operations in txn request ({ops}; "
                           f"at most {budget} at this level)")
    for cmp in compares:
        check_compare(cmp)
    for op in (*success, *failure):
        if type(op) is Put:
            check_put(op)
        elif type(op) is DeleteRange:
            check_delete(op)
        elif type(op) is Range:
            check_range(op)
        elif type(op) is Txn:
            check_txn(op.compares, op.success, op.failure, budget - ops)
        else:
            raise CommandError(INVALID_ARGUMENT, "txn ops must be Put, Range, DeleteRange "
                               "or Txn")


def txn_write_conflict(ops: Sequence[Any]) -> bytes | None:
    """A key one txn branch writes twice, or None — etcd's check (`checkIntervals`)
    exactly, so a txn etcd accepts is accepted here and vice versa: a put may not meet
    another put or a delete of the same level or below; the two branches of a nested
    txn may put the same key (only one runs); a delete range ending in b"\\0" covers
    no put (etcd compares the end as a plain string)."""
    return _intervals(ops)[2]


def _intervals(ops: Sequence[Any]) -> tuple[set[bytes], list[tuple[bytes, bytes]], bytes | None]:
    dels = [(d.key, d.range_end) for d in ops if type(d) is DeleteRange]

    def deleted(k: bytes) -> bool:
        return any(k == lo if not hi else lo <= k < hi for lo, hi in dels)

    puts: set[bytes] = set()
    for t in ops:
        if type(t) is not Txn:
            continue
        puts_then, dels_then, bad = _intervals(t.success)
        if bad is None:
            puts_else, dels_else, bad = _intervals(t.failure)
        if bad is not None:
            return puts, dels, bad
        for k in sorted(puts_then):
            if k in puts or deleted(k):
                return puts, dels, k
            puts.add(k)
        for k in sorted(puts_else):
            if (k in puts and k not in puts_then) or deleted(k):
                return puts, dels, k
            puts.add(k)
        dels += dels_then + dels_else
    for p in ops:
        if type(p) is Put:
            if p.key in puts or deleted(p.key):
                return puts, dels, p.key
            puts.add(p.key)
    return puts, dels, None
