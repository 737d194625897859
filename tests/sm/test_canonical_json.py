"""Canonical JSON's bytes: every member must decode exactly what every other encodes and
refuse the rest alike, so only canonical base64 decodes."""

from __future__ import annotations

import dataclasses

import pytest

from coord.sm import canonical_json
from coord.sm import commands as c
from coord.sm import results as res
from coord.sm.canonical_json import loads
from coord.sm.limits import MAX_JSON_DEPTH
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim, KeyValue


@pytest.mark.parametrize("text", ["YQ", "YQ===", "YR==", "YQ==\n", " YQ==", "Y!Q==", "YQ==é",
                                  "Y Q==", "YQ=="[::-1], "=", "YWJj\nZA=="])
def test_bytes_decode_only_from_canonical_base64(text):
    """Every member must refuse exactly what `_enc_bytes` would not write: stray,
    non-ASCII or whitespace characters, missing or extra padding, non-zero pad bits."""
    with pytest.raises(ValueError):
        canonical_json.from_plain(bytes, text)


def test_bytes_round_trip_through_canonical_base64():
    for raw in (b"", b"a", b"ab", b"abc", bytes(range(256)), b"\xff" * 1000):
        text = canonical_json.to_plain(bytes, raw)
        assert canonical_json.from_plain(bytes, text) == raw
    with pytest.raises(ValueError):
        canonical_json.from_plain(bytes, b"YQ==")  # text only


ROWS = tuple[Claim, ...]
GOOD_ROWS = [["a", 0], ["b", 7], ["c", canonical_json.INT64_MAX]]
BAD_ROWS = {
    "a bool for an int": [["a", 0], ["b", True]],
    "an int past int64": [["a", canonical_json.INT64_MAX + 1]],
    "an int below int64": [["a", canonical_json.INT64_MIN - 1]],
    "an int for a str": [[5, 0]],
    "a row too short": [["a", 0], ["b"]],
    "a row too long": [["a", 0, 1]],
    "a row that is not a list": [("a", 0)],
    "a dict for the rows": {"a": 0},
}


def test_rows_of_a_flat_namedtuple_decode_in_columns_as_one_by_one():
    assert canonical_json.from_plain(ROWS, GOOD_ROWS) == tuple(Claim(*r) for r in GOOD_ROWS)
    assert canonical_json.from_plain(ROWS, []) == ()
    assert canonical_json.to_plain(ROWS, canonical_json.from_plain(ROWS, GOOD_ROWS)) == GOOD_ROWS


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_rows_refused_in_columns_are_refused_with_the_row_s_own_error(name):
    """The column checks refuse what the per-row converter refuses, with its message."""
    rows = BAD_ROWS[name]
    with pytest.raises(ValueError) as batch:
        canonical_json.from_plain(ROWS, rows)
    if isinstance(rows, list):
        bad = next(r for r in rows if r not in GOOD_ROWS and r != ["a", 0])
        with pytest.raises(ValueError) as single:
            canonical_json.from_plain(Claim, bad)
        assert str(batch.value) == str(single.value)


def test_rows_encode_only_from_tuples_of_the_right_kinds():
    for bad in ([Claim("a", True)], [("a", 0, 1)], [["a", 0]], [Claim(5, 0)]):
        with pytest.raises(ValueError):
            canonical_json.to_plain(ROWS, bad)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 2 * MAX_JSON_DEPTH, 900, 100_000])
def test_json_nested_past_the_limit_is_refused_in_the_same_words_at_any_depth(depth):
    """Past MAX_JSON_DEPTH, whether the decoder's own recursion gives up first (its edge
    depends on the caller's stack) or the depth check does, the refusal is one text: every
    member refuses such a command alike."""
    with pytest.raises(ValueError) as info:
        loads(b"[" * depth + b"]" * depth)
    assert str(info.value) == f"malformed JSON: nested deeper than {MAX_JSON_DEPTH}"
    assert loads(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) is not None


def nested_txn_payload(levels: int) -> bytes:
    """A raw Txn command (JSON) whose success branch nests `levels` txns around a put:
    what Admin.Propose, which takes any bytes, can be sent."""
    body = b'{"@":"Put","actor":"","ignore_lease":false,"ignore_value":false,"key":"aw==",' \
           b'"prev_kv":false,"request_id":"","session_id":0,"value":"dg=="}'
    txn = b'"actor":"","compares":[],"failure":[],"request_id":"","success":['
    for _ in range(levels):
        body = b'{"@":"Txn",' + txn + body + b"]}"
    return b"\x01" + bytes([c.command_tag(c.Txn((), ()))]) + b"{" + txn + body + b"]}"


def test_a_txn_nested_past_the_json_limit_is_an_undecodable_command_not_a_crash():
    """Txns 250 deep: decoding them into records recursed past Python's limit inside
    apply (RecursionError on every member); 120 deep is a txn like any other."""
    m = CoordMachine()
    result = m.apply(1, 1, 0, nested_txn_payload(250)).value
    assert result.error == "INVALID_ARGUMENT" and "nested deeper than" in result.message
    assert m.apply(2, 1, 0, nested_txn_payload(120)).value.succeeded


_ODD = [-1, 0, 1 << 63, -(1 << 63), -(1 << 63) - 1, True, False, None, 1.5, "", "YQ==", "YQ",
        "YR==", "YQ==\n", "é", "a b", [], {}, b"YQ==", ["YQ=="]]
_RECORDS = [
    (c.Put, False, c.Put(b"k", b"v", 3, True, "r", actor="u")),
    (c.Put, True, c.Put(b"", b"\xff" * 5)),  # as a txn's op: tagged
    (c.Compare, True, c.Compare.of_version(b"k", "=", 2)),
    (c.Txn, False, c.Txn.compare_and_set(b"k", 1, b"v", "r")),
    (c.Own, False, c.Own(1, "g", (Claim("a", 0),), "r")),
    (c.Compact, False, c.Compact(5, native=True)),
]


def _outcome(convert, value):
    try:
        return "ok", convert(value)
    except ValueError as exc:
        return "refused", str(exc)


def _decoded_variants(cls, tagged, value):
    """A record's plain object, and every one with one field set to each odd value,
    dropped, or with an extra field beside it."""
    plain = canonical_json.to_plain(cls, value)
    if tagged:
        plain["@"] = cls.__name__
    yield plain
    for name in sorted(plain):
        yield {k: v for k, v in plain.items() if k != name}
        for odd in _ODD:
            yield {**plain, name: odd}
    for odd in _ODD:
        yield {**plain, "extra": odd}


@pytest.mark.parametrize("record", _RECORDS, ids=lambda r: f"{r[0].__name__}-{r[1]}")
def test_a_records_decoder_decodes_and_refuses_exactly_as_its_checked_one(record):
    """The decoder made per record (its fields tested in line) against the one that
    converts field by field, over every variant of its object: the same record from a
    good one, the same error, word for word, from a bad one."""
    cls, tagged, value = record
    fast = canonical_json._dataclass_decoder(cls, tagged)
    checked = canonical_json.checked_dataclass_decoder(cls, tagged)
    variants = list(_decoded_variants(cls, tagged, value))
    assert _outcome(fast, variants[0]) == ("ok", value)
    refused = 0
    for plain in variants:
        got = _outcome(fast, plain)
        assert got == _outcome(checked, plain), plain
        refused += got[0] == "refused"
    assert refused > len(variants) // 2


_ENCODED = [*_RECORDS,
            (res.PutResult, True, res.PutResult(revision=3, prev_kv=KeyValue(b"k", b"v", 1, 2, 3))),
            (res.TxnResult, False, res.TxnResult(revision=4, succeeded=True,
                                                 responses=(res.PutResult(revision=4),))),
            (KeyValue, False, KeyValue(b"k", b"\xff", 1, 2, 3, 4))]


@pytest.mark.parametrize("record", _ENCODED, ids=lambda r: f"{r[0].__name__}-{r[1]}")
def test_a_records_encoder_encodes_and_refuses_exactly_as_its_checked_one(record):
    """The encoder made per record against the one that converts field by field, over
    the record with each field set to each odd value: the same plain object from a good
    record, the same error, word for word, from a bad one."""
    cls, tagged, value = record
    fast = canonical_json._dataclass_encoder(cls, tagged)
    checked = canonical_json.checked_dataclass_encoder(cls, tagged)
    assert _outcome(fast, value) == _outcome(checked, value) and _outcome(fast, value)[0] == "ok"
    for field in dataclasses.fields(cls):
        for odd in [*_ODD, b"", b"\xff"]:
            changed = dataclasses.replace(value, **{field.name: odd})
            assert _outcome(fast, changed) == _outcome(checked, changed), (field.name, odd)
