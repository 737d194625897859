"""The codec's bytes: every member must decode exactly what every other encodes and
refuse the rest alike, so only canonical base64 decodes."""

from __future__ import annotations

import pytest

from coord.sm import codec


@pytest.mark.parametrize("text", ["YQ", "YQ===", "YR==", "YQ==\n", " YQ==", "Y!Q==", "YQ==é",
                                  "Y Q==", "YQ=="[::-1], "=", "YWJj\nZA=="])
def test_bytes_decode_only_from_canonical_base64(text):
    """Every member must refuse exactly what `_enc_bytes` would not write: stray,
    non-ASCII or whitespace characters, missing or extra padding, non-zero pad bits."""
    with pytest.raises(ValueError):
        codec.from_plain(bytes, text)


def test_bytes_round_trip_through_canonical_base64():
    for raw in (b"", b"a", b"ab", b"abc", bytes(range(256)), b"\xff" * 1000):
        text = codec.to_plain(bytes, raw)
        assert codec.from_plain(bytes, text) == raw
    with pytest.raises(ValueError):
        codec.from_plain(bytes, b"YQ==")  # text only
