"""The key space's snapshot columns: round trip, shared records, strictness."""

from __future__ import annotations

import zlib

import pytest

from coord.sm import canonical_json, json_stream, kv_columns, snapshot_zlib
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.sm.records import DELETE, PUT, KeyValue, WatchEvent


def busy_machine() -> CoordMachine:
    """Puts, overwrites, deletes, a session-bound key and a compaction, over more keys
    than one chunk holds, so records cross chunk boundaries."""
    m = CoordMachine()
    sid = m.execute(c.OpenSession("s", 60_000)).session_id
    for i in range(2 * kv_columns.CHUNK + 37):
        m.execute(c.Put(b"k%05d" % (i % 400), bytes([i % 256]) * (i % 13)))
    m.execute(c.Put(b"bound", b"", session_id=sid))
    m.execute(c.DeleteRange(b"k00010", b"k00020"))
    m.execute(c.Compact(5))
    for i in range(3):
        m.execute(c.Put(b"k00003", b"again %d" % i))
    m.drain_events()
    return m


def test_a_snapshot_restores_to_the_same_state_and_bytes():
    m = busy_machine()
    snap = m.snapshot()
    other = CoordMachine()
    other.restore(snap)
    assert other.snapshot() == snap and other.describe() == m.describe()
    assert other.kv.range(b"k", b"\0").kvs == m.kv.range(b"k", b"\0").kvs
    assert other.kv.events_since(6, b"k", b"\0").events == m.kv.events_since(6, b"k", b"\0").events


def shared_records(history: list[WatchEvent]) -> tuple[int, dict[bytes, KeyValue]]:
    """How many events' previous records are the very object of the event before them on
    their key, and each key's newest record."""
    newest: dict[bytes, KeyValue] = {}
    shared = 0
    for e in history:
        shared += e.prev_kv is not None and e.prev_kv is newest.get(e.prev_kv.key)
        newest[e.kv.key] = e.kv
    return shared, newest


def test_restored_records_are_shared_as_in_the_machine_that_applied_them():
    m = busy_machine()
    other = CoordMachine()
    other.restore(m.snapshot())
    shared, newest = shared_records(other.kv.history.events)
    assert shared > 600 and shared == shared_records(m.kv.history.events)[0]
    live = other.kv._kvs
    assert all(live[key] is newest[key] for key in live)  # every put is still in history


def test_columns_round_trip_and_are_json():
    records = [KeyValue(b"a", b"", 2, 2, 1), KeyValue(b"\xff\x00", b"v" * 70, 3, 9, 4, 7)]
    chunk = canonical_json.loads(canonical_json.dumps(kv_columns.kv_chunk(records)))
    assert kv_columns.kvs_from([chunk, kv_columns.kv_chunk([])]) == records
    events = [WatchEvent(PUT, records[0], None, 2),
              WatchEvent(DELETE, KeyValue(b"a", b"", 0, 5, 0), records[0], 5)]
    got, live = kv_columns.events_from([kv_columns.events_chunk(events, {})], [records[1]])
    assert got == events and live == [records[1]]


def good_chunks() -> tuple[list, list]:
    kv = KeyValue(b"key", b"value", 2, 3, 2, 0)
    prev = KeyValue(b"key", b"old", 2, 2, 1, 0)
    return kv_columns.kv_chunk([kv]), kv_columns.events_chunk([WatchEvent(PUT, kv, prev, 3)], {})


def planted(where: str, index: int, value) -> list:
    kvs, events = good_chunks()
    chunk = kvs if where == "kv" else events
    if isinstance(index, tuple):
        chunk[index[0]][index[1]] = value
    else:
        chunk[index] = value
    return chunk


BAD_KV_CHUNKS = {
    "non-canonical base64": planted("kv", 0, "a2V5=="),
    "not base64": planted("kv", 0, "k*y"),
    "lengths short of the bytes": planted("kv", 1, [2]),
    "lengths past the bytes": planted("kv", 3, [6]),
    "a negative length": planted("kv", 1, [-1, 4]),
    "a bool for an int": planted("kv", 4, [True]),
    "an int past int64": planted("kv", 5, [1 << 63]),
    "a text for an int": planted("kv", 6, ["2"]),
    "a column too many": [*good_chunks()[0], []],
    "a column of another length": planted("kv", 7, [0, 0]),
    "not a list": {"keys": "a2V5"},
}

BAD_EVENT_CHUNKS = {
    "an unknown type": planted("events", 0, "X"),
    "revisions of another length": planted("events", 1, [3, 4]),
    "a flag that is not 0, 1 or 2": planted("events", 3, "3"),
    "a flag without its record": planted("events", 3, "0"),
    "a record column of another length": planted("events", (2, 7), [0, 0]),
    "a bad previous record": planted("events", (4, 0), "!!"),
    "a column missing": good_chunks()[1][:4],
    "a shared previous record with no event before it":
        [*good_chunks()[1][:3], "2", kv_columns.kv_chunk([])],
}


@pytest.mark.parametrize("name", sorted(BAD_KV_CHUNKS))
def test_a_malformed_kv_chunk_is_refused(name):
    with pytest.raises(ValueError):
        kv_columns.kvs_from([BAD_KV_CHUNKS[name]])


@pytest.mark.parametrize("name", sorted(BAD_EVENT_CHUNKS))
def test_a_malformed_history_chunk_is_refused(name):
    with pytest.raises(ValueError):
        kv_columns.events_from([BAD_EVENT_CHUNKS[name]], [])


def test_the_good_chunks_the_planted_ones_start_from_load():
    kvs, events = good_chunks()
    assert len(kv_columns.kvs_from([kvs])) == 1
    assert len(kv_columns.events_from([events], [])[0]) == 1


def test_a_planted_bad_chunk_in_a_snapshot_leaves_the_machine_untouched():
    m = busy_machine()
    state = canonical_json.loads(zlib.decompress(m.snapshot()))
    state["kv"]["kv_columns"][0] = BAD_KV_CHUNKS["lengths past the bytes"]
    other = busy_machine()
    before = other.snapshot()
    with pytest.raises(ValueError, match="bad snapshot"):
        other.restore(zlib.compress(canonical_json.dumps(state)))
    assert other.snapshot() == before


def test_a_previous_record_is_written_once_as_a_flag_and_comes_back_shared():
    """An overwrite's previous record is the record of the event before it: the chunk
    says so with a flag instead of its bytes. Only a previous record whose event was
    compacted away is written out."""
    m = busy_machine()
    state = canonical_json.loads(zlib.decompress(m.snapshot()))
    chunks = state["kv"]["history_columns"]
    flags = "".join(chunk[3] for chunk in chunks)
    given = sum(len(chunk[4][1]) for chunk in chunks)
    history = m.kv.history.events
    assert len(flags) == len(history) and given == flags.count("1")
    shared = sum(e.prev_kv is not None for e in history) - given
    assert flags.count("2") == shared > 600 and given < 400  # 400 keys: one each at most
    events, _ = kv_columns.events_from(chunks, [])
    assert events == history
    assert shared_records(events)[0] >= shared


def test_two_chunks_side_by_side_share_the_key_map():
    """A flag in one chunk can point at an event in an earlier one: the map goes along."""
    a = KeyValue(b"k", b"1", 2, 2, 1)
    b = KeyValue(b"k", b"2", 2, 3, 2)
    newest: dict[bytes, KeyValue] = {}
    first = kv_columns.events_chunk([WatchEvent(PUT, a, None, 2)], newest)
    second = kv_columns.events_chunk([WatchEvent(PUT, b, a, 3)], newest)
    assert second[3] == "2" and second[4] == kv_columns.kv_chunk([])
    events, _ = kv_columns.events_from([first, second], [b])
    assert events[1].prev_kv is events[0].kv
    with pytest.raises(ValueError, match="no earlier event"):
        kv_columns.events_from([second], [b])


def test_a_restore_read_a_few_bytes_at_a_time_is_the_whole_document_s_restore(monkeypatch):
    """The restore streams: the snapshot decompressed, its text parsed and its chunks
    turned into records a piece at a time. Cut into 7-byte pieces, it gives the machine the
    document read whole (as restores did) describes: the same snapshot bytes, state and
    key space, and exactly the plain document `loads` reads from the whole text."""
    m = busy_machine()
    snap = m.snapshot()
    whole = canonical_json.loads(zlib.decompress(snap))
    monkeypatch.setattr(snapshot_zlib, "DECOMPRESS_PIECE", 7)
    pieces = list(snapshot_zlib.decompressed(snap))
    assert len(pieces) > 100 and max(map(len, pieces)) <= 7
    assert json_stream.load_pieces(json_stream.utf8_pieces(pieces), {}) == whole
    other = CoordMachine()
    other.restore(snap)
    assert other.snapshot() == snap and other.describe() == m.describe()
    assert other.kv.range(b"k", b"\0").kvs == m.kv.range(b"k", b"\0").kvs
    assert shared_records(other.kv.history.events) == shared_records(m.kv.history.events)


def test_a_cut_or_padded_snapshot_is_refused_and_leaves_the_machine_untouched():
    snap = busy_machine().snapshot()
    other = CoordMachine()
    before = other.snapshot()
    for bad in (snap[:-3], snap[: len(snap) // 2], b"x" + snap):
        with pytest.raises(ValueError, match="snapshot is not zlib data"):
            other.restore(bad)
    assert other.snapshot() == before
