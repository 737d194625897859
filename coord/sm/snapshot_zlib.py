"""A snapshot's bytes: its canonical JSON text, zlib-compressed, a piece at a time both
ways, so neither the whole text nor the whole compressed state is ever one buffer while
it is made or read back (`CoordMachine.capture` and `restored`)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

__all__ = ["DECOMPRESS_PIECE", "SNAPSHOT_ZLIB_LEVEL", "compressed", "decompressed"]

SNAPSHOT_ZLIB_LEVEL = 1
"""zlib's fastest level: every member compresses its whole state at every snapshot, on
its event loop between Raft's work. The state after 60,000 puts (13.6 MB of JSON) took
110 ms at level 6 for 2.13 MB and 46 ms at level 1 for 2.30 MB (decompressing: 18 and
25 ms); a snapshot is made far more often than one is sent. Any level restores."""


DECOMPRESS_PIECE = 1 << 20
"""Bytes of a snapshot decompressed at a time (in and out): a restore's text buffer."""


def decompressed(data: bytes | memoryview | Iterable[bytes]) -> Iterator[bytes]:
    """zlib `data` (the stream, or its blocks as they are read from a file) decompressed
    a piece at a time, none of them over DECOMPRESS_PIECE (a state of repeated values
    compresses a hundredfold: the whole text at once was the largest thing a restore
    held). ValueError if `data` is not one whole zlib stream."""
    z = zlib.decompressobj()
    try:
        for block in _blocks(data):
            tail: bytes | memoryview = block
            while tail:
                yield z.decompress(tail, DECOMPRESS_PIECE)
                tail = z.unconsumed_tail
            if z.eof:
                break
        yield z.flush()
    except zlib.error as exc:
        raise ValueError(f"snapshot is not zlib data: {exc}") from None
    if not z.eof:
        raise ValueError("snapshot is not zlib data: incomplete or truncated stream")


def _blocks(data: bytes | memoryview | Iterable[bytes]) -> Iterable[bytes | memoryview]:
    """`data` in blocks of at most DECOMPRESS_PIECE (views: no copy) if it is one
    buffer, else as it comes."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return data
    view = memoryview(data)
    return (view[start:start + DECOMPRESS_PIECE]
            for start in range(0, len(view), DECOMPRESS_PIECE))


def compressed(pieces: Iterator[str]) -> Iterator[bytes]:
    """zlib at SNAPSHOT_ZLIB_LEVEL, a piece at a time (the same bytes as compressing them
    joined)."""
    z = zlib.compressobj(SNAPSHOT_ZLIB_LEVEL)
    for piece in pieces:
        yield z.compress(piece.encode())
    yield z.flush()

