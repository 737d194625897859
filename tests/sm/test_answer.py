"""What `apply` answers (`coord.sm.results.Answer`): the very result the machine made,
its bytes only once someone needs them; a repeated request id's answer is the bytes the
first one was remembered with, decoded only when read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coord.sm import commands as c
from coord.sm import results
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim, Conflict, Grant, KeyValue
from coord.sm.results import Answer, OwnResult, Result, encode_result


def _recording(m: CoordMachine) -> list:
    """The results `m` dispatches, in order (what its apply made, before any answer)."""
    made: list = []
    dispatch = m._dispatch

    def recorded(cmd, now):
        made.append(dispatch(cmd, now))
        return made[-1]

    m._dispatch = recorded
    return made


def test_an_answer_is_the_very_result_the_machine_made(monkeypatch):
    m = CoordMachine()
    made = _recording(m)
    sid = m.apply(1, 1, 0, c.encode_command(c.OpenSession("s", 5_000))).value.session_id
    monkeypatch.setattr(results, "decode_result", pytest.fail)  # no result is decoded below
    own = c.Own(sid, "g", tuple(Claim(f"r{i}", 0) for i in range(50)))
    answer = m.apply(2, 1, 0, c.encode_command(own))
    assert answer.value is made[-1] and type(answer.value) is OwnResult
    assert len(answer.value.grants) == 50


def test_a_repeated_request_ids_answer_is_the_remembered_bytes_decoded():
    m = CoordMachine()
    made = _recording(m)
    cmd = c.encode_command(c.Put(b"k", b"v", request_id="put-1"))
    first = m.apply(1, 1, 0, cmd)
    again = m.apply(2, 1, 0, cmd)  # a retry: answered from memory, not applied again
    assert len(made) == 1 and m.revision == 2
    assert again.data is first.data  # the bytes remembered when the first was applied
    assert again.value == first.value and again.value is not first.value  # decoded


def test_an_answer_round_trips_from_either_side():
    result = Result(error="X", message="m", revision=3)
    data = Answer(result).data
    assert Answer(data=data).value == result and Answer(data=data).data is data
    assert Answer(Answer(data=data).value).data == data
    with pytest.raises(ValueError):
        Answer()
    with pytest.raises(ValueError):
        Answer(result, data)


_text = st.text(max_size=12)  # any code point: escapes, surrogates, beyond the BMP
_int = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
_kv = st.builds(KeyValue, st.binary(max_size=20), st.binary(max_size=20), _int, _int, _int,
                _int)
_put = st.builds(results.PutResult, error=_text, message=_text, revision=_int,
                 prev_kv=st.none() | _kv)
_range = st.builds(results.RangeResult, revision=_int, kvs=st.tuples(_kv, _kv) | st.just(()),
                   count=_int, more=st.booleans())
_txn = st.recursive(_put | _range, lambda inner: st.builds(
    results.TxnResult, succeeded=st.booleans(), revision=_int,
    responses=st.lists(inner, max_size=3).map(tuple)), max_leaves=6)
_any = st.one_of(
    _txn,
    st.builds(OwnResult, error=_text, group=_text, revision=_int,
              grants=st.lists(st.builds(Grant, _text, _int, _int), max_size=3).map(tuple),
              severed=st.lists(_int, max_size=3).map(tuple),
              conflicts=st.lists(st.builds(Conflict, _text, _int, _int), max_size=3).map(tuple)),
    st.builds(results.AlarmResult, alarms=st.lists(_text, max_size=3).map(tuple)),
    st.builds(results.SessionResult, session_id=_int, ttl_ms=_int, message=_text))


@settings(max_examples=200, deadline=None)
@given(_any)
def test_an_answers_size_bound_is_never_below_its_bytes(result):
    """The request-id memory decides no eviction from bounds alone only while they are
    upper bounds of the bytes, in the packed form and the JSON one alike."""
    answer = Answer(result)
    bound = answer.size_bound()
    assert bound >= len(encode_result(result))
    assert answer.size_bound() == bound  # asked again: still not encoded
    data = answer.data
    assert answer.size_bound() == len(data)  # encoded: the length itself
