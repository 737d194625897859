"""An etcd-like MVCC-lite key space.

Current values live in a dict plus a sorted key container (`SortedList`: insert, delete
and the bounds of a range in O(log n), where a plain list shifts every later key on each
insert — a million keys made each new key cost milliseconds). Every change is also
recorded in the history (`coord.sm.kv_history`), which serves watches that start in the
past and reads at a past revision, and which compaction trims.
Revisions are the machine's one global revision (see `Ledger`). The checks of a request
that need no state are `kv_checks`'.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from sortedcontainers import SortedList

from coord.sm import canonical_json, kv_checks, kv_columns, limits
from coord.sm.commands import (
    CREATE,
    LEASE,
    MOD,
    VALUE,
    VERSION,
    Compare,
    DeleteRange,
    Put,
    Range,
    Txn,
    TxnOp,
)
from coord.sm.errors import INVALID_ARGUMENT, KEY_NOT_FOUND, CommandError
from coord.sm.kv_checks import txn_write_conflict
from coord.sm.kv_hash import KVView
from coord.sm.kv_history import ALL_KEYS, KVHistory
from coord.sm.ledger import operation
from coord.sm.records import DELETE, PUT, KeyValue, SessionEvent, WatchEvent
from coord.sm.results import (
    CompactResult,
    DeleteRangeResult,
    EventsResult,
    PutResult,
    RangeResult,
    TxnResult,
)
from coord.sm.sessions import Session, SessionTable

KEY_OVERHEAD = 160  # bytes a current key costs beyond its key and value (record, dict, index)


def _kv_bytes(kv: KeyValue) -> int:
    return KEY_OVERHEAD + len(kv.key) + len(kv.value)


# A txn level's decided path: (compares held, [(op, nested plan for a Txn op else None)]).
_Plan = tuple[bool, list[tuple[Any, "_Plan | None"]]]


def _path_ops(plan: _Plan, kind: type) -> Iterator[Any]:
    """The ops of type `kind` a decided txn will run, nested ones in place."""
    for op, sub in plan[1]:
        if sub is not None:
            yield from _path_ops(sub, kind)
        elif type(op) is kind:
            yield op


class KVStore:
    def __init__(self, sessions: SessionTable | None = None) -> None:
        self.sessions = SessionTable() if sessions is None else sessions
        self.ledger = self.sessions.ledger
        self._kvs: dict[bytes, KeyValue] = {}
        self._keys: SortedList = SortedList()  # of bytes
        self.history = KVHistory()
        # the estimated memory of current values, kept as they change (with the history's,
        # the space quota's state measure; derived, so not in the snapshot)
        self._live_bytes = 0
        self.sessions.add_releaser(self._release_session)

    def __len__(self) -> int:
        return len(self._kvs)

    @property
    def bytes(self) -> int:
        """Estimated bytes of current values and history (see KEY_OVERHEAD)."""
        return self._live_bytes + self.history.bytes

    @property
    def compact_revision(self) -> int:
        """The history's: reads and watches below it fail."""
        return self.history.compact_revision

    def get(self, key: bytes) -> KeyValue | None:
        return self._kvs.get(key)

    # -- reads ---------------------------------------------------------------------------

    @operation(RangeResult)
    def range(
        self, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0
    ) -> RangeResult:
        kv_checks.check_range(Range(key, range_end, limit, revision))
        self._check_range_revision(revision)
        return self._range(key, range_end, limit, revision)

    def _range(self, key: bytes, range_end: bytes, limit: int, revision: int) -> RangeResult:
        if revision and revision < self.ledger.head:
            kvs = self._state_at(revision, key, range_end)
            count = len(kvs)
            kvs = kvs[:limit] if limit else kvs
        elif range_end == b"":
            kv = self._kvs.get(key)
            kvs, count = ([kv] if kv is not None else []), int(kv is not None)
        else:  # the count from the bounds; records only for what is returned
            lo, hi = self._span(key, range_end)
            count = hi - lo
            kvs = [self._kvs[k] for k in self._slice(lo, min(hi, lo + limit) if limit else hi)]
        return RangeResult(revision=self.ledger.head, kvs=tuple(kvs), count=count,
                           more=len(kvs) < count)

    def _span(self, key: bytes, range_end: bytes) -> tuple[int, int]:
        """Positions in the sorted keys of the first key of a range (range_end not b"")
        and one past its last, in O(log n)."""
        lo = self._keys.bisect_left(key)
        hi = len(self._keys) if range_end == ALL_KEYS else self._keys.bisect_left(range_end)
        return lo, max(lo, hi)

    def _slice(self, lo: int, hi: int) -> list[bytes]:
        return list(self._keys.islice(lo, hi)) if hi > lo else []

    def _keys_in(self, key: bytes, range_end: bytes) -> list[bytes]:
        if range_end == b"":
            return [key] if key in self._kvs else []
        return self._slice(*self._span(key, range_end))

    def _state_at(self, revision: int, key: bytes, range_end: bytes) -> list[KeyValue]:
        """The range as it was at `revision`: a key with no event since holds its current
        value; one with events, the previous value of the first of them."""
        state: dict[bytes, KeyValue | None] = {k: self._kvs[k] for k in
                                               self._keys_in(key, range_end)}
        self.history.undo_after(revision, key, range_end, state)
        return [kv for _, kv in sorted(state.items()) if kv is not None]

    @operation(EventsResult)
    def events_since(self, revision: int, key: bytes, range_end: bytes = b"") -> EventsResult:
        """Changes at revisions >= `revision` in the range, for a watch starting there."""
        kv_checks.check_key(key)
        kv_checks.check_range_end(range_end)
        kv_checks.check_int(revision, "revision", low=1)
        events = self.history.since(revision, key, range_end)
        return EventsResult(revision=self.ledger.head, events=events,
                            compact_revision=self.compact_revision)

    # -- writes --------------------------------------------------------------------------

    def put(
        self,
        key: bytes,
        value: bytes,
        session_id: int = 0,
        prev_kv: bool = False,
        *,
        ignore_value: bool = False,
        ignore_lease: bool = False,
    ) -> PutResult:
        return self.put_command(Put(key, value, session_id, prev_kv,
                                    ignore_value=ignore_value, ignore_lease=ignore_lease))

    @operation(PutResult)
    def put_command(self, op: Put) -> PutResult:
        """`put` of a Put as proposed (the machine's: its request id and actor are the
        machine's business, not the key space's), checked as `put` checks it."""
        kv_checks.check_put(op)
        self._check_put_state(op)
        return self._put(op)

    @operation(DeleteRangeResult)
    def delete_range(
        self, key: bytes, range_end: bytes = b"", prev_kv: bool = False
    ) -> DeleteRangeResult:
        op = DeleteRange(key, range_end, prev_kv)
        kv_checks.check_delete(op)
        return self._delete_range(op)

    @operation(TxnResult)
    def txn(
        self,
        compares: Sequence[Compare],
        success: Sequence[TxnOp] = (),
        failure: Sequence[TxnOp] = (),
    ) -> TxnResult:
        """All compares true: run `success`, else `failure`; all writes share one revision.

        etcd's rules, so its clients get its answers: ops may be nested txns; every
        compare (nested ones too) is judged against the state before the txn; a branch
        may not write a key twice (see `txn_write_conflict`); what depends on the state
        (sessions exist, keys exist for ignore_value/ignore_lease, read revisions) is
        checked on the path that will run. Everything is checked before anything runs."""
        kv_checks.check_txn(compares, success, failure, limits.MAX_TXN_OPS)
        for ops in (success, failure):
            conflict = txn_write_conflict(ops)
            if conflict is not None:
                raise CommandError(INVALID_ARGUMENT, f"duplicate key given in txn request: "
                                   f"{conflict!r:.60} is written twice")
        plan = self._plan(compares, success, failure)
        self._check_plan(plan)
        return self._run(plan)

    def _plan(self, compares: Sequence[Compare], success: Sequence[TxnOp],
              failure: Sequence[TxnOp]) -> _Plan:
        """The branch each txn level will take, decided before anything changes."""
        succeeded = all(self._compare(cmp) for cmp in compares)
        ops = success if succeeded else failure
        return succeeded, [(op, self._plan(op.compares, op.success, op.failure)
                             if type(op) is Txn else None) for op in ops]

    def _check_plan(self, plan: _Plan) -> None:
        """etcd's order: every put on the path (nested ones too), then every range."""
        for op in _path_ops(plan, Put):
            self._check_put_state(op, in_txn=True)
        for op in _path_ops(plan, Range):
            self._check_range_revision(op.revision)

    def _run(self, plan: _Plan) -> TxnResult:
        responses: list[PutResult | RangeResult | DeleteRangeResult | TxnResult] = []
        for op, sub in plan[1]:
            if sub is not None:
                responses.append(self._run(sub))
            elif type(op) is Put:
                responses.append(self._put(op))
            elif type(op) is DeleteRange:
                responses.append(self._delete_range(op))
            else:
                responses.append(self._range(op.key, op.range_end, op.limit, op.revision))
        return TxnResult(revision=self.ledger.head, succeeded=plan[0],
                         responses=tuple(responses))

    def put_if_absent(self, key: bytes, value: bytes) -> TxnResult:
        """Create `key` iff absent; otherwise the response holds the existing value."""
        return self.txn([Compare.of_create(key, "=", 0)], [Put(key, value)], [Range(key)])

    def compare_and_set(self, key: bytes, expected_version: int, value: bytes) -> TxnResult:
        """Write iff `key` is at `expected_version` (0: absent) — the seed's register."""
        return self.txn([Compare.of_version(key, "=", expected_version)], [Put(key, value)],
                        [Range(key)])

    @operation(CompactResult)
    def compact(self, revision: int) -> CompactResult:
        """Forget history before `revision`, as etcd does: reads at `revision` and watches
        starting there still work (they see the puts that stand at it). A change that
        leaves the revision where it is."""
        self.history.compact(revision, self.ledger.revision)
        self.ledger.mark()
        return CompactResult(revision=self.ledger.revision, compact_revision=revision)

    # -- checks against the state --------------------------------------------------------

    def _check_put_state(self, op: Put, in_txn: bool = False) -> None:
        """etcd checks a put's lease before its key, but a txn's puts the other way
        round; both may fail at once, and clients see which error came first."""
        if in_txn:
            self._check_put_key(op)
        if op.session_id != 0:
            self.sessions.require(op.session_id)
        self._check_put_key(op)

    def _check_put_key(self, op: Put) -> None:
        if (op.ignore_value or op.ignore_lease) and op.key not in self._kvs:
            raise CommandError(KEY_NOT_FOUND, f"key {op.key!r:.60} does not exist "
                               "(ignore_value/ignore_lease need a current value)")

    def _check_range_revision(self, revision: int) -> None:
        self.history.check_read_revision(revision, self.ledger.revision)

    def _compare(self, cmp: Compare) -> bool:
        """etcd 3.4's applyCompare: over a range, every key must pass (stopping at the
        first that does not); a range with no key is judged as one missing key."""
        if cmp.range_end == b"":
            return self._compare_kv(cmp, self._kvs.get(cmp.key))
        lo, hi = self._span(cmp.key, cmp.range_end)
        if lo == hi:
            return self._compare_kv(cmp, None)
        return all(self._compare_kv(cmp, self._kvs[k]) for k in self._keys.islice(lo, hi))

    @staticmethod
    def _compare_kv(cmp: Compare, kv: KeyValue | None) -> bool:
        if cmp.target == VALUE:
            if kv is None:
                return False  # etcd: a value compare on a missing key is false
            have: bytes | int = kv.value
            want: bytes | int = cmp.value
        else:
            want = cmp.number
            if kv is None:
                have = 0
            elif cmp.target == CREATE:
                have = kv.create_revision
            elif cmp.target == MOD:
                have = kv.mod_revision
            elif cmp.target == LEASE:
                have = kv.session_id
            else:
                assert cmp.target == VERSION
                have = kv.version
        match cmp.op:
            case "=":
                return have == want
            case "!=":
                return have != want
            case "<":
                return have < want  # type: ignore[operator]
            case _:
                return have > want  # type: ignore[operator]

    # -- mutation (validated input only) -------------------------------------------------

    def _put(self, op: Put) -> PutResult:
        revision = self.ledger.touch()
        prev = self._kvs.get(op.key)
        value, session_id = op.value, op.session_id
        if prev is None:
            kv = KeyValue(op.key, value, revision, revision, 1, session_id)
            self._keys.add(op.key)
        else:
            self._live_bytes -= _kv_bytes(prev)
            if op.ignore_value:
                value = prev.value
            if op.ignore_lease:
                session_id = prev.session_id
            kv = KeyValue(op.key, value, prev.create_revision, revision, prev.version + 1,
                          session_id)
            if prev.session_id and prev.session_id != session_id:
                self._unbind(prev)
        if session_id:
            self.sessions.require(session_id).keys.add(op.key)
        self._kvs[op.key] = kv
        self._live_bytes += _kv_bytes(kv)
        self._record(WatchEvent(PUT, kv, prev, revision))
        return PutResult(revision=revision, prev_kv=prev if op.prev_kv else None)

    def _delete_range(self, op: DeleteRange) -> DeleteRangeResult:
        keys = self._keys_in(op.key, op.range_end)
        if not keys:
            return DeleteRangeResult(revision=self.ledger.head)
        revision = self.ledger.touch()
        prevs = [self._delete(k, revision) for k in keys]
        return DeleteRangeResult(revision=revision, deleted=len(prevs),
                                 prev_kvs=tuple(prevs) if op.prev_kv else ())

    def _delete(self, key: bytes, revision: int) -> KeyValue:
        prev = self._kvs.pop(key)
        self._keys.remove(key)
        self._live_bytes -= _kv_bytes(prev)
        if prev.session_id:
            self._unbind(prev)
        self._record(WatchEvent(DELETE, KeyValue(key, b"", 0, revision, 0), prev, revision))
        return prev

    def _unbind(self, kv: KeyValue) -> None:
        session = self.sessions.get(kv.session_id)
        if session is not None:
            session.keys.discard(kv.key)

    def _record(self, event: WatchEvent) -> None:
        self.history.record(event)
        self.ledger.emit(event)

    def _release_session(self, session: Session, ended: SessionEvent) -> None:
        for key in sorted(session.keys):
            self._delete(key, ended.revision)

    # -- snapshot ------------------------------------------------------------------------

    def capture(self) -> dict:
        """This state now, cheaply: copies of the containers (the records are frozen), to
        be converted later, a slice at a time (`canonical_json.iter_dumps`)."""
        kvs, keys = self._kvs.copy(), list(self._keys)
        step = kv_columns.CHUNK
        return {
            **self.history.capture(),
            "kv_columns": canonical_json.Lazy(
                range(0, len(keys), step),
                lambda at: kv_columns.kv_chunk([kvs[k] for k in keys[at:at + step]]),
                slice_len=1),
        }

    def view(self) -> KVView:
        """Copies of the containers (the records are frozen), for hashing off the loop's
        critical path (coord.sm.kv_hash)."""
        return KVView(self._kvs.copy(), self.history.events.copy(), self.compact_revision,
                      self.ledger.revision)

    @staticmethod
    def snapshot_hooks(section: str, keys: kv_columns.KeySpaceLoader) -> dict:
        """What `json_stream.load_pieces` does with this state's chunks in a snapshot whose
        `section` holds it: each one goes to `keys` as it is read (see `load_state`)."""
        return {(section, "history_columns"): keys.history_chunk,
                (section, "kv_columns"): keys.kv_chunk}

    def load_state(self, state: dict, chunks: kv_columns.KeySpaceLoader) -> None:
        """`state` as read with `snapshot_hooks`: its chunks already taken by `chunks`."""
        if state.keys() != {"compact_revision", "compacted", "history_columns", "kv_columns"}:
            raise ValueError("KV snapshot fields do not match")
        history, kvs = chunks.take()
        keys = [kv.key for kv in kvs]
        # Checked pairwise: sorting a copy held a second million-item list at the peak.
        if not all(map(operator.lt, keys, islice(keys, 1, None))):
            raise ValueError("KV snapshot out of order")
        self.history.load(state, history)
        self._kvs = {kv.key: kv for kv in kvs}
        self._keys = SortedList(keys)
        self._live_bytes = sum(map(_kv_bytes, kvs))
        for kv in kvs:
            if kv.session_id:
                session = self.sessions.get(kv.session_id)
                if session is None:
                    raise ValueError(f"key bound to unknown session {kv.session_id}")
                session.keys.add(kv.key)

    def describe(self) -> dict:
        return {"keys": len(self._kvs), "history": len(self.history),
                "compact_revision": self.compact_revision}
