"""Keys, values and ranges as the wire wants them.

Keys and values are bytes on the wire; the client also takes str (UTF-8). A range's end
is computed here, not by the server, so a watch resumed on another member covers
exactly the same keys.
"""

from __future__ import annotations

__all__ = ["Bytesish", "key_range", "prefix_end", "to_bytes"]

Bytesish = bytes | bytearray | memoryview | str


def to_bytes(v: Bytesish) -> bytes:
    """Keys and values are bytes on the wire; str is encoded as UTF-8."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"expected bytes or str, got {type(v).__name__}")


def prefix_end(prefix: bytes) -> bytes:
    """The range end covering every key that starts with `prefix` (etcd's rule): the
    prefix with its last byte below 0xff incremented; b"\\0" (no end) if there is none."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


def key_range(
    key: Bytesish | None = None,
    range_end: Bytesish | None = None,
    prefix: Bytesish | None = None,
) -> tuple[bytes, bytes]:
    """(key, range_end) for one key, [key, range_end), or every key under `prefix`
    (prefix "" means every key). The end is computed here, not by the server, so a
    resumed watch covers exactly the same keys."""
    if prefix is not None:
        if key is not None or range_end is not None:
            raise ValueError("give either prefix or key/range_end, not both")
        p = to_bytes(prefix)
        return (p, prefix_end(p)) if p else (b"\0", b"\0")
    if key is None:
        raise ValueError("a key or a prefix is required")
    return to_bytes(key), to_bytes(range_end) if range_end is not None else b""
