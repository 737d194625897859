"""What a user may do with keys, by etcd 3.4's rules: the checks apply runs on a command
made as a user, and the ones a member runs before serving a read or a watch.

A user's roles' permissions merge into read and write interval lists (READWRITE in
both; a type etcd does not know in neither). A single key is allowed if some interval
overlaps it; a range if the intervals overlapping it cover it without a gap. Intervals
compare as etcd's "affine" byte strings, where the empty string is above every other
(an end of b"\\0" means no end, so a permission on every key from `key` on, and a
request for every key from `key` on, are intervals with no end). A holder of the root
role may do anything. While auth is off everything is allowed. The native API's typed
resources (`coord.sm.auth.KINDS`) are checked by the same rules, each kind's permissions
merged apart from the others'.

Which checks a command needs (`key_checks`): a put writes its key, reads it for
prev_kv, and writes every key already attached to its lease (a user who could not
revoke the lease may not attach to it); a delete writes its range and reads it for
prev_kv; a txn reads each compare's range and needs what each of its ops needs, nested
txns included; a lease revoke (CloseSession) writes every key attached. etcd 3.4.23
checks a txn's puts for their key only and does not look into nested txns; coord checks
an op in a txn as it checks the op alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from coord.sm import commands as c
from coord.sm.auth import KV, READ, READWRITE, ROOT, WRITE, AuthStore
from coord.sm.sessions import SessionTable

Bound = tuple[int, bytes]  # (0, key) for a key; (1, b"") above every key
Interval = tuple[Bound, Bound]
Check = tuple[bytes, bytes, bool]  # (key, range_end, write)

_NO_END: Bound = (1, b"")


def _bound(key: bytes) -> Bound:
    return (0, key) if key else _NO_END


def _point(key: bytes) -> Interval:
    return (_bound(key), _bound(key + b"\0"))


def _range(key: bytes, range_end: bytes) -> Interval:
    return (_bound(key), _NO_END if range_end == b"\0" else _bound(range_end))


def _overlaps(iv: Interval, other: Interval) -> bool:
    """etcd's Interval.Compare(iv, other) == 0."""
    (begin, end), (other_begin, other_end) = iv, other
    if begin < other_begin and end <= other_begin:
        return False
    return begin < other_end


@dataclass(frozen=True)
class Merged:
    """A user's permissions, merged: intervals ordered by their start (ties in the order
    the user's roles, sorted, and their permissions give them)."""

    read: tuple[Interval, ...]
    write: tuple[Interval, ...]


def merged(auth: AuthStore, user: str, kind: str = KV) -> Merged | None:
    """`user`'s merged permissions of `kind` (None: no such user), cached until auth
    changes."""
    hit = auth.merged.get((user, kind))
    if hit is not None:
        return hit
    u = auth.users.get(user)
    if u is None:
        return None
    read: list[Interval] = []
    write: list[Interval] = []
    for name in u.roles:
        role = auth.roles.get(name)
        for p in role.perms if role is not None else ():
            if p.kind != kind:
                continue
            ivl = _range(p.key, p.range_end) if p.range_end else _point(p.key)
            if p.perm_type in (READ, READWRITE):
                read.append(ivl)
            if p.perm_type in (WRITE, READWRITE):
                write.append(ivl)
    out = Merged(tuple(sorted(read, key=lambda i: i[0])),
                 tuple(sorted(write, key=lambda i: i[0])))
    auth.merged[(user, kind)] = out
    return out


def _covers(intervals: tuple[Interval, ...], iv: Interval) -> bool:
    """etcd's IntervalTree.Contains: the intervals overlapping `iv`, in order, join
    without a gap and reach from its start to its end."""
    first = last = None
    for other in intervals:
        if not _overlaps(iv, other):
            continue
        if first is None:
            first, last = other[0], other[1]
            continue
        if last < other[0]:
            return False
        last = max(last, other[1])
    return first is not None and last >= iv[1] and first <= iv[0]


def permitted(auth: AuthStore, user: str, key: bytes, range_end: bytes, write: bool,
              kind: str = KV) -> bool:
    """Whether `user` may read (or write) `key` (range_end b"") or [key, range_end) of
    `kind`."""
    if not auth.enabled:
        return True
    u = auth.users.get(user)
    if u is None:
        return False
    if ROOT in u.roles:
        return True
    perms = merged(auth, user, kind)
    intervals = perms.write if write else perms.read
    if not range_end:
        point = _point(key)
        return any(_overlaps(point, other) for other in intervals)
    return _covers(intervals, _range(key, range_end))


def key_checks(cmd: object, sessions: SessionTable) -> Iterator[Check]:
    """Every (key, range_end, write) access `cmd` needs (see the module doc)."""
    t = type(cmd)
    if t is c.Range:
        yield cmd.key, cmd.range_end, False
    elif t is c.Put:
        yield cmd.key, b"", True
        if cmd.session_id:
            yield from _lease_keys(cmd.session_id, sessions)
        if cmd.prev_kv:
            yield cmd.key, b"", False
    elif t is c.DeleteRange:
        yield cmd.key, cmd.range_end, True
        if cmd.prev_kv:
            yield cmd.key, cmd.range_end, False
    elif t is c.Txn:
        for cmp in cmd.compares:
            yield cmp.key, cmp.range_end, False
        for op in (*cmd.success, *cmd.failure):
            yield from key_checks(op, sessions)
    elif t is c.CloseSession:
        yield from _lease_keys(cmd.session_id, sessions)


def _lease_keys(session_id: int, sessions: SessionTable) -> Iterator[Check]:
    session = sessions.get(session_id)
    for key in session.keys if session is not None else ():
        yield key, b"", True
