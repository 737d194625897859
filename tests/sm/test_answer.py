"""What `apply` answers (`coord.sm.results.Answer`): the very result the machine made,
its bytes only once someone needs them; a repeated request id's answer is the bytes the
first one was remembered with, decoded only when read."""

from __future__ import annotations

import pytest

from coord.sm import commands as c
from coord.sm import results
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim
from coord.sm.results import Answer, OwnResult, Result


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
