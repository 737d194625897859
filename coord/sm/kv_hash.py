"""etcd's HashKV for coord's key space: one 32-bit number for the keys as they stood at a
revision plus the history kept up to it, so operators can check that members agree
(the same log applied gives the same number on every member; a member that diverged
gives another).

It is computed from a `KVView` — containers copied from the store in a few
milliseconds, of frozen records — a slice at a time (`hash_steps` yields between
slices), so a member with a million keys keeps stepping Raft while it hashes. Records
are combined by a sum of their CRC-32s, which does not depend on the order they are
visited in; the compact revision is part of the number.
"""

from __future__ import annotations

import zlib
from collections.abc import Generator
from dataclasses import dataclass

from coord.sm.records import KeyValue, WatchEvent

SLICE = 5_000
MASK = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class KVView:
    kvs: dict[bytes, KeyValue]  # a copy of the current values
    history: list[WatchEvent]  # a copy of the kept history, oldest first
    compact_revision: int
    revision: int  # the store's revision when the view was taken


def _kv(kv: KeyValue) -> int:
    head = b"k%d:%d:%d:%d:%d:" % (kv.create_revision, kv.mod_revision, kv.version,
                                   kv.session_id, len(kv.key))
    return zlib.crc32(kv.value, zlib.crc32(kv.key, zlib.crc32(head)))


def _event(e: WatchEvent) -> int:
    head = b"e%d:%s:%d:" % (e.revision, e.type.encode(), len(e.kv.key))
    return zlib.crc32(e.kv.value, zlib.crc32(e.kv.key, zlib.crc32(head)))


def hash_steps(view: KVView, revision: int) -> Generator[None, None, int]:
    """Yields between slices; returns the hash of the keys at `revision` (0: the view's
    revision) and of the history at or below it. The caller checks `revision` against
    the compact revision and the view's revision first."""
    at = revision or view.revision
    undo: dict[bytes, KeyValue | None] = {}
    for i, e in enumerate(reversed(view.history)):  # newest first: the oldest prev wins
        if e.revision <= at:
            break
        undo[e.kv.key] = e.prev_kv
        if i % SLICE == SLICE - 1:
            yield
    total = view.compact_revision
    for i, (key, kv) in enumerate(view.kvs.items()):
        if key not in undo:
            total += _kv(kv)
        if i % SLICE == SLICE - 1:
            yield
    total += sum(_kv(kv) for kv in undo.values() if kv is not None)
    for i, e in enumerate(view.history):
        if e.revision > at:
            break
        total += _event(e)
        if i % SLICE == SLICE - 1:
            yield
    return total & MASK


def hash_now(view: KVView, revision: int = 0) -> int:
    """`hash_steps` run to the end (tests, tools)."""
    steps = hash_steps(view, revision)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
