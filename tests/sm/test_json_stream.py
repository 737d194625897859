"""JSON read from pieces (a restore's streamed text) against `loads` on the whole text."""

from __future__ import annotations

import pytest

from coord.sm.canonical_json import dumps, loads
from coord.sm.json_stream import load_pieces, utf8_pieces
from coord.sm.limits import MAX_JSON_DEPTH

DOC = {"a": [1, -22, 333_333_333_333], "big": {"items": [[1, "x"], {"k": 10}, [], 12345],
                                               "n": 7, "z": "\u00e9\u4e2d"},
       "t": True, "u": None, "w": "é"}
HOOKS = {("big", "items"): lambda item: ("seen", item)}


def cut_at(text: str, *cuts: int) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_read_in_pieces_cut_anywhere_it_is_loads_with_each_hooked_item_passed_on():
    text = dumps(DOC).decode() + " \n"
    whole = loads(text.encode())
    expected = {**whole, "big": {**whole["big"],
                                 "items": [("seen", x) for x in whole["big"]["items"]]}}
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1, 7):  # every first cut, a spread of second ones
            assert load_pieces(cut_at(text, i, j), HOOKS) == expected, (i, j)
    assert load_pieces([text], {}) == whole


def test_a_number_cut_at_a_piece_s_end_is_read_whole():
    assert load_pieces(["[1", "2", "3]"], {}) == [123]
    assert load_pieces(['{"big":{"items":[4', "56]}}"], HOOKS) == {"big": {"items": [
        ("seen", 456)]}}


def test_utf8_split_inside_a_character_decodes_and_bad_bytes_are_refused():
    raw = dumps({"w": "é中"})
    for i in range(len(raw) + 1):
        assert load_pieces(utf8_pieces([raw[:i], raw[i:]]), {}) == {"w": "é中"}
    with pytest.raises(ValueError, match="malformed JSON"):
        load_pieces(utf8_pieces([b'{"w":"\xff"}']), {})


@pytest.mark.parametrize("text", [
    '{"big":{"items":[1,2}}', '{"big":{"items":[1,2]}',
    '{"a":1,"a":2}', '{"big":{"items":[],"items":[]}}', '{"big":{"items":[1.5]}}',
    '{"big":{"items":[NaN]}}', '[1] [2]', '', '{"big":{"items":[1,]}}', '{"big":{1:2}}',
    '\ufeff{}', '{"a":[1,2}',
])
def test_what_loads_refuses_is_refused_in_pieces_too(text):
    with pytest.raises(ValueError):
        loads(text.encode())
    for i in range(len(text) + 1):
        with pytest.raises(ValueError):
            load_pieces(cut_at(text, i), HOOKS)


def test_a_hooked_path_that_holds_no_array_is_refused():
    for text in ('{"big":{"items":{}}}', '{"big":{"items":1}}'):
        with pytest.raises(ValueError, match="expected '\\['"):
            load_pieces([text], HOOKS)


def test_the_depth_limit_counts_from_the_document_s_top_through_a_hooked_array():
    def nested(levels: int) -> str:
        return "[" * levels + "]" * levels

    at_limit = '{"big":{"items":[' + nested(MAX_JSON_DEPTH - 3) + "]}}"
    assert load_pieces([at_limit], HOOKS) == loads(at_limit.encode()) | {
        "big": {"items": [("seen", loads(nested(MAX_JSON_DEPTH - 3).encode()))]}}
    past = '{"big":{"items":[' + nested(MAX_JSON_DEPTH - 2) + "]}}"
    with pytest.raises(ValueError) as info:
        load_pieces([past], HOOKS)
    assert str(info.value) == f"malformed JSON: nested deeper than {MAX_JSON_DEPTH}"
    with pytest.raises(ValueError):
        loads(past.encode())
