"""The key space in a snapshot: its records in columns, a chunk at a time.

A snapshot used to hold one JSON object per key and per history event, and loading it
made a Python call per field of each (at 1M keys, 14 s of a member's start-up and of a
wiped follower's catch-up). Here each chunk of up to `CHUNK` records is a short JSON list
of columns: the keys, and the values, each as one base64 text with a list of lengths, and
one list per int field. Loading a chunk is a few C calls per column and one constructor
call per record. The columns are as strict as the per-record canonical JSON: canonical base64,
int64 ints, lengths that add up exactly, known event types.

A history event's previous record is, in a machine that applied it, the very record of
the event before it on that key, and a live key's record that of its newest event. A
chunk writes such a previous record as a flag ("2") instead of its bytes a second time:
values were most of a snapshot's text, and a history of overwrites held each one twice.
`events_from` gives back the shared objects, so a restored member holds what the member
it came from holds, not twice that.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from coord.sm import canonical_json
from coord.sm.records import DELETE, PUT, KeyValue, WatchEvent

__all__ = ["CHUNK", "KeySpaceLoader", "events_chunk", "events_from", "kv_chunk", "kvs_from"]

CHUNK = 500
"""Records per chunk: one piece of a snapshot being taken (the loop runs between
pieces), about 100 KB of text for 100-byte values."""

_TYPE_CODES = {PUT: "P", DELETE: "D"}
_CODE_TYPES = {code: kind for kind, code in _TYPE_CODES.items()}
_INT_ONLY = {int}  # bool is not int here: type(True) is bool
_b64 = canonical_json.encoder(bytes)
_unb64 = canonical_json.decoder(bytes)


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


def events_chunk(events: Sequence[WatchEvent], newest: dict[bytes, KeyValue]) -> list:
    """Events as columns: [type codes, revisions, their records (a `kv_chunk`), each
    one's previous record as a flag, those previous records given (a `kv_chunk`)]. The
    flag is "0" for none, "2" for the record of the newest earlier event on its key, "1"
    for one given in the last column. `newest` maps each key to that record: empty for
    a history's first chunk, then passed to each next one (this fills it in)."""
    flags = []
    given = []
    for e in events:
        prev = e.prev_kv
        if prev is None:
            flags.append("0")
        else:
            same = newest.get(e.kv.key)
            if same is prev or same == prev:  # equal states give equal snapshots
                flags.append("2")
            else:
                flags.append("1")
                given.append(prev)
        newest[e.kv.key] = e.kv
    return [
        "".join([_TYPE_CODES[e.type] for e in events]), [e.revision for e in events],
        kv_chunk([e.kv for e in events]), "".join(flags), kv_chunk(given),
    ]


class KeySpaceLoader:
    """The key space read back a chunk at a time, as a snapshot's text gives them (its
    history's chunks, then its live keys'): each chunk becomes records as it comes, so a
    restore holds the plain form of one chunk at a time, not the whole key space's
    (`coord.sm.json_stream`). A live record equal to its key's newest event's record is
    taken as that very record, as in the machine the snapshot was taken from."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.live: list[KeyValue] = []
        self._newest: dict[bytes, KeyValue] = {}  # each key's newest event's record so far

    def history_chunk(self, chunk: Any) -> None:
        """Take one `events_chunk` (ValueError if malformed)."""
        if type(chunk) is not list or len(chunk) != 5:
            raise ValueError(f"expected a history chunk of 5 columns, got {chunk!r:.80}")
        codes, revs, records, has_prev, prev_records = chunk
        if type(codes) is not str or type(has_prev) is not str:
            raise ValueError("history chunk: type codes and flags must be text")
        n = len(codes)
        try:
            types = [_CODE_TYPES[code] for code in codes]
        except KeyError as exc:
            raise ValueError(f"unknown event type code {exc}") from None
        revisions = _ints(revs, n, "revisions")
        kvs = _records(chunk=records)
        if len(kvs) != n or len(has_prev) != n:
            raise ValueError("history chunk: columns of different lengths")
        given = _records(prev_records)
        if sum(map(has_prev.count, "012")) != n:
            raise ValueError("history chunk: previous-record flags must be 0, 1 or 2")
        if has_prev.count("1") != len(given):
            raise ValueError("history chunk: previous records do not match their flags")
        newest = self._newest
        present = iter(given)
        prevs: list[KeyValue | None] = []
        for kv, flag in zip(kvs, has_prev, strict=True):
            if flag == "0":
                prevs.append(None)
            elif flag == "2":
                same = newest.get(kv.key)
                if same is None:
                    raise ValueError("history chunk: a previous record refers to no earlier "
                                     "event")
                prevs.append(same)
            else:  # not its key's earlier record (`events_chunk` wrote that as "2")
                prevs.append(next(present))
            newest[kv.key] = kv
        self.events += map(WatchEvent, types, kvs, prevs, revisions)

    def kv_chunk(self, chunk: Any) -> None:
        """Take one `kv_chunk` of live records (ValueError if malformed)."""
        self.live += self.shared(_records(chunk))

    def take(self) -> tuple[list[WatchEvent], list[KeyValue]]:
        """The events and live records read, and this loader emptied: its key map (a
        million entries at a million keys) is gone before the state's own is built."""
        out = self.events, self.live
        self.events, self.live, self._newest = [], [], {}
        return out

    def shared(self, live: list[KeyValue]) -> list[KeyValue]:
        """`live`, each record equal to its key's newest event's record replaced by it."""
        newest = self._newest
        return [same if (same := newest.get(kv.key)) is not None and same == kv else kv
                for kv in live]


def kvs_from(chunks: Any) -> list[KeyValue]:
    """The records of a list of `kv_chunk`s (ValueError if any column is malformed)."""
    loader = KeySpaceLoader()
    for chunk in _list(chunks, "KV chunks"):
        loader.kv_chunk(chunk)
    return loader.live


def events_from(chunks: Any, live: list[KeyValue]) -> tuple[list[WatchEvent], list[KeyValue]]:
    """The events of a list of `events_chunk`s, and `live` with each record that equals
    its key's newest event's record replaced by that record (`KeySpaceLoader`)."""
    loader = KeySpaceLoader()
    for chunk in _list(chunks, "history chunks"):
        loader.history_chunk(chunk)
    return loader.events, loader.shared(live)


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
                       and canonical_json.INT64_MIN <= min(column)
                       and max(column) <= canonical_json.INT64_MAX):
        raise ValueError(f"KV chunk: {what} must be int64s")
    return column


def _list(value: Any, what: str) -> list:
    if type(value) is not list:
        raise ValueError(f"{what} must be a list")
    return value
