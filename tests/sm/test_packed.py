"""The packed binary form of flat commands and results (`coord.sm.packed`): what gets
it, that it decodes to exactly what was encoded, that the JSON form of the same records
decodes, that it refuses malformed bytes as strictly as the JSON form (a record with
fewer fields too), and that fields of many rows (an own's claims and grants) go as
columns."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm import packed
from coord.sm import results as res
from coord.sm.canonical_json import INT64_MAX, INT64_MIN, dumps, to_plain
from coord.sm.records import Claim, Conflict, Grant, KeyValue

PUT = c.Put(b"k\x00\xff", b"v", 3, True, "rid-ü")


def test_flat_commands_and_results_are_packed_and_nested_ones_stay_json():
    assert c.encode_command(PUT)[0] == c.PACKED_VERSION
    assert c.encode_command(c.Range(b"a", b"b", 10, 4))[0] == c.PACKED_VERSION
    assert c.encode_command(c.Txn.put_if_absent(b"r", b"A", "t"))[0] == c.FORMAT_VERSION
    assert c.encode_command(c.Own(1, "g", (Claim("r", 0),)))[0] == c.PACKED_VERSION
    assert c.encode_result(res.PutResult(revision=7))[0] == res.PACKED_VERSION
    # an optional that is set does not fit: the same type is written as JSON then
    with_prev = res.PutResult(revision=7, prev_kv=KeyValue(b"k", b"v", 1, 2, 3, 4))
    assert c.encode_result(with_prev)[0] == res.FORMAT_VERSION
    assert c.decode_result(bytes(c.encode_result(with_prev))) == with_prev


def test_a_packed_put_is_its_fields_and_round_trips():
    data = c.encode_command(PUT)
    rid = "rid-ü".encode()
    head = struct.pack(">IIq?I??I", 3, 1, 3, True, len(rid), False, False, 0)
    assert data == bytes((c.PACKED_VERSION, 1, 8)) + head + b"k\x00\xffv" + rid
    assert c.decode_command(data) == PUT
    fresh = c.decode_result(bytes(c.encode_result(res.PutResult(revision=9, message="m"))))
    assert fresh == res.PutResult(revision=9, message="m")


def test_the_json_form_of_a_flat_record_decodes():
    old = (b'\x01\x01{"actor":"","ignore_lease":false,"ignore_value":false,"key":"aw==",'
           b'"prev_kv":false,"request_id":"r","session_id":0,"value":"dg=="}')
    assert c.decode_command(old) == c.Put(b"k", b"v", request_id="r")
    old_result = b'\x01\x01{"error":"","message":"","prev_kv":null,"revision":5}'
    assert c.decode_result(old_result) == res.PutResult(revision=5)


def test_values_the_packed_form_cannot_hold_go_as_json_or_are_refused():
    big = c.Range(b"a", b"", INT64_MAX, 0)
    assert c.decode_command(c.encode_command(big)) == big
    assert c.encode_command(big)[0] == c.PACKED_VERSION
    assert packed.pack(c.Range(b"a", b"", INT64_MAX + 1, 0)) is None
    with pytest.raises(ValueError):  # the JSON form names the bad value
        c.encode_command(c.Range(b"a", b"", INT64_MAX + 1, 0))
    with pytest.raises(ValueError):
        c.encode_command(c.Put(b"k", b"v", True))  # type: ignore[arg-type] - a bool id
    lone = c.Put(b"k", b"v", 0, False, "\ud800")  # a str UTF-8 cannot hold
    assert packed.pack(lone) is None
    assert c.encode_command(lone)[0] == c.FORMAT_VERSION
    assert c.decode_command(c.encode_command(lone)) == lone


GOOD = c.encode_command(PUT)


@pytest.mark.parametrize("garbage", [
    GOOD[:2],  # no field count
    GOOD[:10],  # a short header
    GOOD[:-1],  # a short tail
    GOOD + b"x",  # a byte left over
    GOOD[:2] + b"\x09" + GOOD[3:],  # more fields than a put has
    GOOD[:2] + b"\x06" + GOOD[3:],  # fewer than a put has
    # a put of five fields (before ignore_value and ignore_lease), as packed then
    bytes((c.PACKED_VERSION, 1, 5)) + struct.pack(">IIq?I", 1, 1, 0, False, 1) + b"kvr",
    GOOD[:23] + b"\x02" + GOOD[24:],  # prev_kv's byte is neither 0 nor 1
    GOOD[:-3] + b"\xff\xfe\xfd",  # the request id is not UTF-8
    bytes((c.PACKED_VERSION, 0xEE)) + GOOD[2:],  # an unknown tag
    bytes((c.PACKED_VERSION, 4)) + GOOD[2:],  # a txn: it has no packed form
])
def test_malformed_packed_bytes_are_refused(garbage):
    with pytest.raises(ValueError):
        c.decode_command(garbage)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=40),
       st.integers(INT64_MIN, INT64_MAX), st.booleans(), st.text(max_size=20),
       st.booleans(), st.booleans())
def test_every_put_round_trips_and_matches_its_json_form(key, value, sid, prev, rid, iv, il):
    cmd = c.Put(key, value, sid, prev, rid, iv, il)
    data = c.encode_command(cmd)
    assert data[0] == c.PACKED_VERSION and c.decode_command(data) == cmd
    as_json = bytes((c.FORMAT_VERSION, data[1])) + dumps(to_plain(c.Put, cmd))
    assert c.decode_command(as_json) == cmd


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=48))
def test_random_packed_bytes_never_crash_decoding(tail):
    data = bytes((c.PACKED_VERSION, 1)) + tail
    try:
        cmd = c.decode_command(data)
    except ValueError:
        return
    assert c.encode_command(cmd) == data  # only the canonical bytes decode


OWN_RESULT = res.OwnResult(revision=9, group="g", grants=(Grant("a", 1, 9), Grant("b", 2, 9)),
                           severed=(4, 5), conflicts=(Conflict("x", 3, 7),))


@pytest.mark.parametrize("record", [
    c.Own(1, "g", ()), c.Own(1, "g", (Claim("r", 0),), "o"),
    c.Own(7, "grp", tuple(Claim(f"r/{i}", i) for i in range(1000)), "big"),
    c.Release(1, "g", ("a", "ü", "")), OWN_RESULT, res.OwnResult(group="g"),
], ids=lambda r: f"{type(r).__name__}")
def test_fields_of_many_rows_go_as_columns_and_round_trip(record):
    encode = c.encode_result if isinstance(record, res.Result) else c.encode_command
    decode = c.decode_result if isinstance(record, res.Result) else c.decode_command
    data = bytes(encode(record))
    assert data[0] == c.PACKED_VERSION and decode(data) == record
    assert encode(decode(data)) == data


def test_a_column_is_its_values_one_field_of_the_rows_at_a_time():
    data = c.encode_command(c.Own(5, "g", (Claim("ab", 1), Claim("c", 2)), "r"))
    # session, len(group), rows, len(request_id), len(actor)
    head = struct.pack(">qIIII", 5, 1, 2, 1, 0)
    columns = struct.pack(">II", 2, 1) + b"abc" + struct.pack(">qq", 1, 2)
    assert data == bytes((c.PACKED_VERSION, data[1], 5)) + head + b"gr" + columns


def test_rows_given_as_plain_tuples_decode_as_their_records_and_bad_rows_go_to_json():
    plain = c.Own(1, "g", (("r", 0),))  # type: ignore[arg-type]
    assert c.decode_command(c.encode_command(plain)).claims == (Claim("r", 0),)
    for bad in [(("r",),), (("r", "0"),), (("r", True),), ["r", 0]]:
        cmd = c.Own(1, "g", bad)  # type: ignore[arg-type]
        assert packed.pack(cmd) is None
        with pytest.raises(ValueError):
            c.encode_command(cmd)


BIG = c.encode_command(c.Own(1, "g", (Claim("ab", 1), Claim("c", 2)), "r"))


@pytest.mark.parametrize("garbage", [
    BIG[:-1], BIG + b"\0", BIG[:-16],  # a short int column, a byte over, no ints at all
    BIG[:15] + b"\x00\x00\x00\x09" + BIG[19:],  # more rows than there are
    BIG[:-19] + b"\xff\xfe\xfd" + BIG[-16:],  # a resource that is not UTF-8
])
def test_malformed_columns_are_refused(garbage):
    with pytest.raises(ValueError):
        c.decode_command(garbage)


def test_a_bool_column_holds_only_0_and_1():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Flags:
        name: str
        flags: tuple[bool, ...]

    data = packed.pack(Flags("f", (True, False, True)))
    assert data is not None and packed.unpack(Flags, data, 0) == Flags("f", (True, False, True))
    with pytest.raises(ValueError, match="bool column"):
        packed.unpack(Flags, data[:-1] + b"\x02", 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(INT64_MIN, INT64_MAX), st.text(max_size=10),
       st.lists(st.tuples(st.text(max_size=12), st.integers(INT64_MIN, INT64_MAX)),
                max_size=30), st.text(max_size=20))
def test_every_own_round_trips_and_matches_its_json_form(sid, group, claims, rid):
    cmd = c.Own(sid, group, tuple(Claim(r, g) for r, g in claims), rid)
    data = c.encode_command(cmd)
    assert data[0] == c.PACKED_VERSION and c.decode_command(data) == cmd
    as_json = bytes((c.FORMAT_VERSION, data[1])) + dumps(to_plain(c.Own, cmd))
    assert c.decode_command(as_json) == cmd
