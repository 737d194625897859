"""How a command or a result is written: `[version][tag]`, then its fields, in
`coord.sm.packed`'s binary form when they fit (version 2) and as canonical JSON
(`coord.sm.canonical_json`, version 1) otherwise. Commands and results share this form and keep
tags of their own; every member decodes both versions."""

from __future__ import annotations

from typing import Any

from coord.sm import packed
from coord.sm.canonical_json import dumps, from_plain, loads, to_plain

JSON_VERSION = 1
PACKED_VERSION = 2


def encode(tag: int, value: Any) -> bytes:
    """`value`'s bytes under `tag` (ValueError if a field has the wrong type)."""
    body = packed.packer(type(value))(value)
    if body is not None:
        return bytes((PACKED_VERSION, tag)) + body
    return bytes((JSON_VERSION, tag)) + dumps(to_plain(type(value), value))


def decode(data: bytes, by_tag: dict[int, type], what: str) -> Any:
    """The `what` (command, result) `data` encodes, its class found by tag in `by_tag`;
    ValueError for anything else."""
    if len(data) < 2:
        raise ValueError(f"{what} too short")
    if data[0] != JSON_VERSION and data[0] != PACKED_VERSION:
        raise ValueError(f"unknown {what} format version {data[0]}")
    cls = by_tag.get(data[1])
    if cls is None:
        raise ValueError(f"unknown {what} tag {data[1]}")
    if data[0] == PACKED_VERSION:
        return packed.unpack(cls, data, 2)
    return from_plain(cls, loads(data[2:]))
