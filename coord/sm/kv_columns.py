"""The key space in a snapshot: its records in columns, a chunk at a time.

A snapshot used to hold one JSON object per key and per history event, and loading it
made a Python call per field of each (at 1M keys, 14 s of a member's start-up and of a
wiped follower's catch-up). Here each chunk of up to `CHUNK` records is a short JSON list
of columns: the keys, and the values, each as one base64 text with a list of lengths, and
one list per int field. Loading a chunk is a few C calls per column and one constructor
call per record. The columns are as strict as the per-record codec: canonical base64,
int64 ints, lengths that add up exactly, known event types.

A history event's records are the same objects as the live key's record, or the event
before it on that key, in a machine that applied them; `events_from` restores that
sharing, so a restored member holds what the member it came from holds, not twice that.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from coord.sm import codec
from coord.sm.records import DELETE, PUT, KeyValue, WatchEvent

__all__ = ["CHUNK", "events_chunk", "events_from", "kv_chunk", "kvs_from"]

CHUNK = 500
"""Records per chunk: one piece of a snapshot being taken (the loop runs between
pieces), about 100 KB of text for 100-byte values."""

_TYPE_CODES = {PUT: "P", DELETE: "D"}
_CODE_TYPES = {code: kind for kind, code in _TYPE_CODES.items()}
_INT_ONLY = {int}  # bool is not int here: type(True) is bool
_b64 = codec.encoder(bytes)
_unb64 = codec.decoder(bytes)


def kv_chunk(records: Sequence[KeyValue]) -> list:
    """Records as columns: [keys, key lengths, values, value lengths, create revisions,
    mod revisions, versions, session ids]."""
    keys = [r.key for r in records]
    values = [r.value for r in records]
    return [
        _b64(b"".join(keys)), list(map(len, keys)),
        _b64(b"".join(values)), list(map(len, values)),
        [r.create_revision for r in records], [r.mod_revision for r in records],
        [r.version for r in records], [r.session_id for r in records],
    ]


def events_chunk(events: Sequence[WatchEvent]) -> list:
    """Events as columns: [type codes, revisions, their records (a `kv_chunk`), which
    have a previous record ("1"/"0" each), those previous records (a `kv_chunk`)]."""
    prevs = [e.prev_kv for e in events]
    return [
        "".join([_TYPE_CODES[e.type] for e in events]), [e.revision for e in events],
        kv_chunk([e.kv for e in events]),
        "".join(["0" if p is None else "1" for p in prevs]),
        kv_chunk([p for p in prevs if p is not None]),
    ]


def kvs_from(chunks: Any) -> list[KeyValue]:
    """The records of a list of `kv_chunk`s (ValueError if any column is malformed)."""
    out: list[KeyValue] = []
    for chunk in _list(chunks, "KV chunks"):
        out += _records(chunk)
    return out


def events_from(chunks: Any, live: list[KeyValue]) -> tuple[list[WatchEvent], list[KeyValue]]:
    """The events of a list of `events_chunk`s, and `live` with each record that equals
    its key's newest event's record replaced by that record: an event's record and the
    next event's previous record on the same key are then one object, as they were in
    the machine the snapshot was taken from."""
    types: list[str] = []
    revisions: list[int] = []
    kvs: list[KeyValue] = []
    prevs: list[KeyValue | None] = []
    for chunk in _list(chunks, "history chunks"):
        if type(chunk) is not list or len(chunk) != 5:
            raise ValueError(f"expected a history chunk of 5 columns, got {chunk!r:.80}")
        codes, revs, records, has_prev, prev_records = chunk
        if type(codes) is not str or type(has_prev) is not str:
            raise ValueError("history chunk: type codes and flags must be text")
        n = len(codes)
        try:
            types += [_CODE_TYPES[code] for code in codes]
        except KeyError as exc:
            raise ValueError(f"unknown event type code {exc}") from None
        revisions += _ints(revs, n, "revisions")
        chunk_kvs = _records(chunk=records)
        if len(chunk_kvs) != n or len(has_prev) != n:
            raise ValueError("history chunk: columns of different lengths")
        kvs += chunk_kvs
        given = _records(prev_records)
        if has_prev.count("1") + has_prev.count("0") != n:
            raise ValueError("history chunk: previous-record flags must be 0 or 1")
        if has_prev.count("1") != len(given):
            raise ValueError("history chunk: previous records do not match their flags")
        present = iter(given)
        prevs += [next(present) if flag == "1" else None for flag in has_prev]
    newest: dict[bytes, KeyValue] = {}
    for i, (kv, prev) in enumerate(zip(kvs, prevs, strict=True)):
        if prev is not None:
            same = newest.get(prev.key)
            if same is not None and same == prev:
                prevs[i] = same
        newest[kv.key] = kv
    live = [same if (same := newest.get(kv.key)) is not None and same == kv else kv
            for kv in live]
    return list(map(WatchEvent, types, kvs, prevs, revisions)), live


def _records(chunk: Any) -> list[KeyValue]:
    if type(chunk) is not list or len(chunk) != 8:
        raise ValueError(f"expected a KV chunk of 8 columns, got {chunk!r:.80}")
    keys64, key_lens, values64, value_lens, creates, mods, versions, sessions = chunk
    keys = _split(keys64, key_lens, "keys")
    n = len(keys)
    values = _split(values64, value_lens, "values")
    if len(values) != n:
        raise ValueError("KV chunk: columns of different lengths")
    return list(map(KeyValue, keys, values, _ints(creates, n, "create revisions"),
                    _ints(mods, n, "mod revisions"), _ints(versions, n, "versions"),
                    _ints(sessions, n, "session ids")))


def _split(text: Any, lengths: Any, what: str) -> list[bytes]:
    """Canonical base64 `text` cut into pieces of `lengths`, which must cover it exactly."""
    blob = _unb64(text)
    ends = list(accumulate(_ints(lengths, None, f"{what} lengths")))
    if (ends and min(lengths) < 0) or (ends[-1] if ends else 0) != len(blob):
        raise ValueError(f"KV chunk: {what} lengths do not cover their bytes")
    starts = [0, *ends[:-1]] if ends else []
    return [blob[start:end] for start, end in zip(starts, ends, strict=True)]


def _ints(column: Any, n: int | None, what: str) -> list[int]:
    """`column` if it is a list of `n` (None: any number of) int64s, else ValueError."""
    if type(column) is not list or (n is not None and len(column) != n):
        raise ValueError(f"KV chunk: {what} must be a list of {n} ints")
    if column and not (set(map(type, column)) == _INT_ONLY
                       and codec.INT64_MIN <= min(column)
                       and max(column) <= codec.INT64_MAX):
        raise ValueError(f"KV chunk: {what} must be int64s")
    return column


def _list(value: Any, what: str) -> list:
    if type(value) is not list:
        raise ValueError(f"{what} must be a list")
    return value
