"""A binary form for flat records: the commands and results every write carries.

Canonical JSON (`coord.sm.codec`) costs about 3 µs to encode a put and 4 µs to decode it,
and its result as much again; every member decodes every command and encodes every
result, so a put spent ~20 µs of the cluster's CPU on JSON alone. A record whose fields
are all ints, bools, strs and bytes (and optionals that are None) has a fixed shape, so
it is written here with one `struct` call: about ten times faster either way.

Layout after the caller's `[version][tag]`: one byte, the number of fields written;
then one struct holding, in field order, each int (int64), each bool (one byte, 0 or 1)
and the byte length (uint32) of each str and bytes field; then those strs (UTF-8) and
bytes in field order. Optional fields are not written: a record is packed only when they are
None, and decodes with None. Trailing fields in the class's `ADDED_FIELDS` may be
missing from a record written before they were added, as in the JSON form.

Decoding is as strict as the JSON form: a wrong length, a bool that is not 0 or 1, or
text that is not UTF-8 is a ValueError. A record that does not fit (a type this cannot
write, a value out of range, an optional that is set) is not packed: `pack` says None
and the caller writes JSON, which also gives the exact error for a bad value.
"""

from __future__ import annotations

import dataclasses
import operator
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from coord.sm.codec import record_fields

_FIXED = {int: "q", bool: "?"}
_VARIABLE = (str, bytes)


@dataclasses.dataclass(frozen=True)
class _Shape:
    """How one record class is packed: its written fields and, per field count a record
    may carry, the struct that holds the fixed part."""

    cls: type
    names: tuple[str, ...]  # the written fields, in order
    kinds: tuple[type, ...]
    get: Callable[[Any], tuple]  # the written fields' values, as a tuple
    variable: tuple[tuple[int, bool], ...]  # (position, is str) of each str/bytes field
    optional_none: tuple[str, ...]  # optional fields: written as absent, decoded as None
    structs: dict[int, struct.Struct]  # field count -> header struct
    bool_at: dict[int, tuple[int, ...]]  # field count -> the header's bool bytes' offsets
    positional: bool


def _optional_of(hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in args


@cache
def shape(cls: type) -> _Shape | None:
    """The packed shape of dataclass `cls`, or None if its fields do not allow one."""
    if not dataclasses.is_dataclass(cls):
        return None
    names: list[str] = []
    kinds: list[type] = []
    optional_none: list[str] = []
    for name, hint in record_fields(cls):
        if hint in _FIXED or hint in _VARIABLE:
            names.append(name)
            kinds.append(hint)
        elif _optional_of(hint):
            optional_none.append(name)
        else:
            return None
    if len(names) < 2:
        return None  # attrgetter of one name gives the value, not a tuple
    added = frozenset(getattr(cls, "ADDED_FIELDS", ()))
    required = len(names)
    while required and names[required - 1] in added:
        required -= 1
    if added - set(names[required:]) - set(optional_none):
        return None  # an added field that is not trailing: old records have no fixed shape
    structs, bool_at = {}, {}
    for count in range(max(required, 2), len(names) + 1):
        codes = [_FIXED.get(k, "I") for k in kinds[:count]]
        structs[count] = struct.Struct(">" + "".join(codes))
        bool_at[count] = tuple(struct.calcsize(">" + "".join(codes[:i]))
                               for i, k in enumerate(kinds[:count]) if k is bool)
    variable = tuple((i, k is str) for i, k in enumerate(kinds) if k in _VARIABLE)
    positional = not any(f.kw_only for f in dataclasses.fields(cls))
    return _Shape(cls, tuple(names), tuple(kinds), operator.attrgetter(*names), variable,
                  tuple(optional_none), structs, bool_at, positional)


def pack(value: Any) -> bytes | None:
    """`value`'s packed bytes, or None if it does not fit the packed form."""
    sh = shape(type(value))
    if sh is None:
        return None
    for name in sh.optional_none:
        if getattr(value, name) is not None:
            return None
    values = sh.get(value)
    if tuple(map(type, values)) != sh.kinds:
        return None
    head = list(values)
    tail = []
    count = len(values)
    try:
        for i, is_str in sh.variable:
            data = values[i].encode() if is_str else values[i]
            head[i] = len(data)
            tail.append(data)
        fixed = sh.structs[count].pack(*head)  # bools as 0/1, ints checked as int64
    except (struct.error, UnicodeEncodeError):  # out of range; a lone surrogate
        return None
    return b"".join((bytes((count,)), fixed, *tail))


def unpack(cls: type, data: bytes, offset: int) -> Any:
    """The `cls` record packed in `data` from `offset` (ValueError if it is not one)."""
    sh = shape(cls)
    if sh is None:
        raise ValueError(f"{cls.__name__} has no packed form")
    if len(data) <= offset:
        raise ValueError(f"packed {cls.__name__}: no field count")
    count = data[offset]
    st = sh.structs.get(count)
    if st is None:
        raise ValueError(f"packed {cls.__name__}: {count} fields, not one of {sorted(sh.structs)}")
    pos = offset + 1 + st.size
    if len(data) < pos:
        raise ValueError(f"packed {cls.__name__}: {len(data)} bytes, too short")
    for at in sh.bool_at[count]:
        if data[offset + 1 + at] > 1:
            raise ValueError(f"packed {cls.__name__}: a bool byte is {data[offset + 1 + at]}")
    values = list(st.unpack_from(data, offset + 1))
    for i, is_str in sh.variable:
        if i >= count:
            break
        end = pos + values[i]
        piece = data[pos:end]
        if is_str:
            try:
                piece = piece.decode()
            except UnicodeDecodeError as exc:
                raise ValueError(f"packed {cls.__name__}: {exc}") from None
        values[i] = piece
        pos = end
    if pos != len(data):
        raise ValueError(f"packed {cls.__name__}: {len(data) - pos} bytes too many or few")
    if sh.positional and count == len(sh.names) and not sh.optional_none:
        return cls(*values)
    fields = dict(zip(sh.names, values, strict=False))  # missing added fields: defaults
    for name in sh.optional_none:
        fields[name] = None
    return cls(**fields)
