"""Keys and ranges as the wire wants them (coord.client.keys)."""

from __future__ import annotations

import pytest

from coord.client.keys import key_range, prefix_end


def test_prefix_end_and_key_range():
    assert prefix_end(b"a") == b"b"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"
    assert key_range(prefix="") == (b"\0", b"\0")
    assert key_range("k") == (b"k", b"")
    assert key_range("a", "\0") == (b"a", b"\0")
    with pytest.raises(ValueError):
        key_range("a", prefix="b")
    with pytest.raises(ValueError):
        key_range()
