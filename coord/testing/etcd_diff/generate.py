"""Seeded random etcd v3 operation sequences for the differential test against real etcd.

`sequence(seed)` is a pure function of the seed. Every key lives under the sequence's own
prefix, so sequences can share one server. Requests are etcd's protobuf messages with
two kinds of placeholders the player resolves per system (`coord.testing.etcd_diff.play`):
  - revisions are relative to the revision the sequence starts at (0 stays 0: "now",
    or "absent" in a create/mod compare), because both systems run many sequences;
  - lease ids are slots (1..LEASE_SLOTS, 0: none): odd slots are granted with an
    explicit id, even ones with id 0 (the server picks), so ids are compared by slot.

What is not generated, and why (README, "Where coord knowingly differs from etcd"):
lease TTLs outside 2 s..1 h and negative lease ids, keys/values near the size limits,
and sorted ranges of more than 12 keys (tie order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from coord.etcdpb import rpc_pb2 as pb

LEASE_SLOTS = 6
KEYS = (b"a", b"b", b"b/1", b"b/2", b"c", b"d", b"e")  # at most 12 keys: see above
VALUES = (b"", b"v1", b"v2", b"v3", b"x" * 40)
TTLS = (5, 30, 60, 600, 3600)  # within both systems' bounds
FAR_FUTURE = 1000  # a relative revision no sequence reaches
R, C, W = pb.RangeRequest, pb.Compare, pb.WatchCreateRequest


@dataclass(frozen=True)
class Step:
    """One operation: `kind` names the RPC; `req` its request with placeholders; for
    "cancel", `watch` is the index of the watch (in creation order) to cancel; `caller`
    the user whose token goes with it (auth sequences: `coord.testing.etcd_diff.auth`)."""

    kind: str
    req: object = None
    watch: int = 0
    caller: str = ""


def prefix_of(seed: int) -> bytes:
    return b"diff/%d/" % seed


def prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.prefix = prefix_of(seed)
        self.length = self.rnd.randint(10, 30)
        self.watches = 0

    def chance(self, p: float) -> bool:
        return self.rnd.random() < p

    def key(self) -> bytes:
        if self.chance(0.02):
            return b""  # etcd: "key is not provided"
        return self.prefix + self.rnd.choice(KEYS)

    def revision(self) -> int:
        """Relative: mostly within the sequence, sometimes in the future."""
        return self.rnd.choice((0, 0, 1, 2, 3, self.rnd.randint(1, self.length + 4),
                                FAR_FUTURE))

    def lease(self) -> int:
        return self.rnd.randint(1, LEASE_SLOTS) if self.chance(0.3) else 0

    def key_range(self) -> tuple[bytes, bytes]:
        key = self.key()
        match self.rnd.randint(0, 5):
            case 0 | 1:
                return key, b""
            case 2:  # a sub-range, or an empty/backwards one
                return key, self.prefix + self.rnd.choice(KEYS)
            case 3:  # every key under the sequence's prefix
                return self.prefix, prefix_end(self.prefix)
            case 4:  # a key's own prefix (b -> b, b/1, b/2)
                return key, prefix_end(key) if key else b""
            case _:
                return key, b"\0"  # every key >= key

    # -- requests ------------------------------------------------------------------------

    def put(self) -> pb.PutRequest:
        ignore_value, ignore_lease = self.chance(0.1), self.chance(0.1)
        value = self.rnd.choice(VALUES)
        if ignore_value and not self.chance(0.2):
            value = b""  # mostly valid; sometimes "value is provided"
        lease = self.lease()
        if ignore_lease and not self.chance(0.2):
            lease = 0  # mostly valid; sometimes "lease is provided"
        return pb.PutRequest(key=self.key(), value=value, lease=lease,
                             prev_kv=self.chance(0.4), ignore_value=ignore_value,
                             ignore_lease=ignore_lease)

    def range(self) -> pb.RangeRequest:
        key, end = self.key_range()
        r = pb.RangeRequest(key=key, range_end=end, serializable=self.chance(0.3),
                            keys_only=self.chance(0.15), count_only=self.chance(0.1))
        if self.chance(0.3):
            r.limit = self.rnd.choice((1, 2, 3, 100))
        if self.chance(0.3):
            r.revision = self.revision()
        if self.chance(0.35):
            r.sort_order = self.rnd.choice((R.NONE, R.ASCEND, R.DESCEND))
            r.sort_target = self.rnd.choice((R.KEY, R.VERSION, R.CREATE, R.MOD, R.VALUE))
        for name in ("min_mod_revision", "max_mod_revision", "min_create_revision",
                     "max_create_revision"):
            if self.chance(0.08):
                setattr(r, name, self.revision())
        return r

    def delete(self) -> pb.DeleteRangeRequest:
        key, end = self.key_range()
        return pb.DeleteRangeRequest(key=key, range_end=end, prev_kv=self.chance(0.5))

    def compare(self) -> pb.Compare:
        target = self.rnd.choice((C.VERSION, C.CREATE, C.MOD, C.VALUE, C.LEASE))
        # Lease ids a server picked differ between the systems: only (in)equality of
        # lease ids means the same on both.
        results = (C.EQUAL, C.NOT_EQUAL) if target == C.LEASE else \
            (C.EQUAL, C.NOT_EQUAL, C.LESS, C.GREATER)
        key, end = self.key_range() if self.chance(0.3) else (self.key(), b"")
        cmp = pb.Compare(key=key, range_end=end, target=target,
                         result=self.rnd.choice(results))
        if target == C.VERSION:
            cmp.version = self.rnd.randint(0, 3)
        elif target == C.CREATE:
            cmp.create_revision = self.revision()
        elif target == C.MOD:
            cmp.mod_revision = self.revision()
        elif target == C.VALUE:
            cmp.value = self.rnd.choice(VALUES)
        else:
            cmp.lease = self.lease()
        return cmp

    def request_op(self, depth: int) -> pb.RequestOp:
        kind = self.rnd.choice(("put", "put", "range", "delete", "txn") if depth < 2
                               else ("put", "put", "range", "delete"))
        if kind == "put":
            return pb.RequestOp(request_put=self.put())
        if kind == "range":
            return pb.RequestOp(request_range=self.range())
        if kind == "delete":
            return pb.RequestOp(request_delete_range=self.delete())
        return pb.RequestOp(request_txn=self.txn(depth + 1))

    def txn(self, depth: int = 0) -> pb.TxnRequest:
        t = pb.TxnRequest(
            compare=[self.compare() for _ in range(self.rnd.randint(0, 3))],
            success=[self.request_op(depth) for _ in range(self.rnd.randint(0, 3))],
            failure=[self.request_op(depth) for _ in range(self.rnd.randint(0, 2))])
        if depth == 0 and _deletes_to_the_end(t):
            _drop_ignore_flags(t)
        return t

    def watch(self) -> pb.WatchCreateRequest:
        key, end = self.key_range()
        if not key:
            key = self.prefix + self.rnd.choice(KEYS)  # an empty key watches nothing useful
        # One filter at most: a watch that reports nothing cannot be waited for, and
        # etcd's compaction races with such a watch's catching up.
        filters = [self.rnd.choice((W.NOPUT, W.NODELETE))] if self.chance(0.3) else []
        start = self.rnd.choice((0, 0, 1, 2, self.rnd.randint(1, self.length), FAR_FUTURE))
        self.watches += 1
        wid = self.rnd.choice((0, 0, 0, 1, 2))  # 0: the server picks; else maybe a duplicate
        return pb.WatchCreateRequest(key=key, range_end=end, start_revision=start,
                                     prev_kv=self.chance(0.5), filters=filters, watch_id=wid)

    def step(self) -> Step:
        kind = self.rnd.choices(
            ("put", "range", "delete", "txn", "compact", "grant", "revoke", "ttl", "leases",
             "watch", "cancel"),
            weights=(25, 18, 7, 16, 3, 7, 3, 4, 2, 6, 2))[0]
        if kind == "put":
            return Step(kind, self.put())
        if kind == "range":
            return Step(kind, self.range())
        if kind == "delete":
            return Step(kind, self.delete())
        if kind == "txn":
            return Step(kind, self.txn())
        if kind == "compact":
            # physical: etcd answers once the old revisions are gone from its store; else
            # a watch created just after may or may not see them (a race, not a fact).
            # coord's compaction is always complete when it answers.
            return Step(kind, pb.CompactionRequest(revision=self.revision(), physical=True))
        if kind == "grant":
            return Step(kind, pb.LeaseGrantRequest(TTL=self.rnd.choice(TTLS),
                                                   ID=self.rnd.randint(1, LEASE_SLOTS)))
        if kind == "revoke":
            return Step(kind, pb.LeaseRevokeRequest(ID=self.rnd.randint(1, LEASE_SLOTS)))
        if kind == "ttl":
            return Step(kind, pb.LeaseTimeToLiveRequest(ID=self.rnd.randint(1, LEASE_SLOTS),
                                                        keys=True))
        if kind == "leases":
            return Step(kind, pb.LeaseLeasesRequest())
        if kind == "watch":
            return Step(kind, self.watch())
        # an existing watch, or now and then one that does not exist
        return Step(kind, watch=self.rnd.randint(0, self.watches))


def _ops(t: pb.TxnRequest) -> list[pb.RequestOp]:
    ops = [*t.success, *t.failure]
    return ops + [o for op in ops if op.HasField("request_txn") for o in _ops(op.request_txn)]


def _deletes_to_the_end(t: pb.TxnRequest) -> bool:
    return any(op.request_delete_range.range_end == b"\0" for op in _ops(t)
               if op.HasField("request_delete_range"))


def _drop_ignore_flags(t: pb.TxnRequest) -> None:
    """etcd 3.4 crashes (panics while applying) on a txn that deletes a key with a range
    ending in "\0" and then puts it with ignore_value/ignore_lease: its duplicate-key
    check does not see the overlap. Such txns are not generated."""
    for op in _ops(t):
        if op.HasField("request_put"):
            op.request_put.ignore_value = op.request_put.ignore_lease = False


def sequence(seed: int) -> list[Step]:
    """The operations of sequence `seed`: 10 to 30 steps; a lease slot is granted first
    more often than not, so puts with leases usually find one."""
    gen = _Gen(seed)
    steps = [Step("grant", pb.LeaseGrantRequest(TTL=60, ID=1))] if gen.chance(0.7) else []
    while len(steps) < gen.length:
        steps.append(gen.step())
    return steps
