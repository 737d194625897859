"""A binary form for flat records: the commands and results every write carries.

Canonical JSON (`coord.sm.canonical_json`) costs about 3 µs to encode a put and 4 µs to decode it,
and its result as much again; every member decodes every command and encodes every
result, so a put spent ~20 µs of the cluster's CPU on JSON alone. A record whose fields
are ints, bools, strs and bytes, tuples of those, tuples of NamedTuples of those (an
own's claims, its grants) and optionals that are None has a fixed shape, and is written
here with a struct call per part: a put decodes in 1.5 µs, an own of 10,000 claims in
3.5 ms instead of 19.

Layout after the caller's `[version][tag]`: one byte, the number of fields written (a
record with another count is refused); then one struct holding, in field order, each int
(int64), each bool (one byte, 0 or 1), the byte length (uint32) of each str and bytes
field and the row count (uint32) of each tuple field; then those strs (UTF-8) and bytes
in field order; then each tuple field's rows as columns, one per field of a row: n
int64s, n bool bytes, or n uint32 lengths and the n strs or bytes. Optional fields are
not written: a record is packed only when they are None, and decodes with None.

Decoding is as strict as the JSON form: a wrong length, a bool that is not 0 or 1, or
text that is not UTF-8 is a ValueError, and only canonical bytes decode. A record that
does not fit (a value out of range, an optional that is set, a row of the wrong shape)
is not packed: `pack` says None and the caller writes JSON, which also gives the exact
error for a bad value.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from coord.sm.canonical_json import is_namedtuple, record_fields

_FIXED = {int: "q", bool: "?"}
_VARIABLE = (str, bytes)
_SCALARS = (int, bool, str, bytes)


@dataclasses.dataclass(frozen=True)
class _Column:
    """A field of many rows: `tuple[scalar, ...]` (`row` None) or `tuple[NT, ...]` for
    a NamedTuple `row` of scalars. Written as one column per scalar of the row."""

    kinds: tuple[type, ...]
    row: type | None


@dataclasses.dataclass(frozen=True)
class _Shape:
    """How one record class is packed: its written fields and the struct that holds their
    fixed part."""

    cls: type
    names: tuple[str, ...]  # the written fields, in order
    types: tuple[type, ...]  # each written field's value type (tuple for a column)
    get: Callable[[Any], tuple]  # the written fields' values, as a tuple
    variable: tuple[tuple[int, bool], ...]  # (position, is str) of each str/bytes field
    columns: tuple[tuple[int, _Column], ...]  # (position, column) of each column field
    optional_none: tuple[str, ...]  # optional fields: written as absent, decoded as None
    head: struct.Struct  # the fixed part
    bool_at: tuple[int, ...]  # the fixed part's bool bytes' offsets
    positional: bool


def _optional_of(hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in args


def _column_of(hint: Any) -> _Column | None:
    if typing.get_origin(hint) is not tuple:
        return None
    args = typing.get_args(hint)
    if len(args) != 2 or args[1] is not Ellipsis:
        return None
    item = args[0]
    if item in _SCALARS:
        return _Column((item,), None)
    if is_namedtuple(item):
        kinds = tuple(h for _, h in record_fields(item))
        if kinds and all(k in _SCALARS for k in kinds):
            return _Column(kinds, item)
    return None


@cache
def shape(cls: type) -> _Shape | None:
    """The packed shape of dataclass `cls`, or None if its fields do not allow one."""
    if not dataclasses.is_dataclass(cls):
        return None
    names: list[str] = []
    codes: list[str] = []
    value_types: list[type] = []
    variable: list[tuple[int, bool]] = []
    columns: list[tuple[int, _Column]] = []
    optional_none: list[str] = []
    for name, hint in record_fields(cls):
        column = _column_of(hint)
        if hint in _SCALARS:
            if hint in _VARIABLE:
                variable.append((len(names), hint is str))
            codes.append(_FIXED.get(hint, "I"))  # a str's or bytes' length
            value_types.append(hint)
        elif column is not None:
            columns.append((len(names), column))
            codes.append("I")  # its row count
            value_types.append(tuple)
        elif _optional_of(hint):
            optional_none.append(name)
            continue
        else:
            return None
        names.append(name)
    if len(names) < 2:
        return None  # attrgetter of one name gives the value, not a tuple
    bool_at = tuple(struct.calcsize(">" + "".join(codes[:i]))
                    for i in range(len(names)) if value_types[i] is bool)
    positional = not any(f.kw_only for f in dataclasses.fields(cls))
    return _Shape(cls, tuple(names), tuple(value_types), operator.attrgetter(*names),
                  tuple(variable), tuple(columns), tuple(optional_none),
                  struct.Struct(">" + "".join(codes)), bool_at, positional)


def _pack_column(rows: tuple, column: _Column, out: list[bytes]) -> bool:
    """Append `rows`' columns to `out`; False if they do not fit. A check per column,
    made by C loops: an own of 10,000 claims is two columns, not 10,000 rows."""
    n = len(rows)
    if not n:
        return True  # no rows: every column is empty
    if column.row is None:
        cols: list[Any] = [rows]
    else:
        if (not set(map(type, rows)) <= {column.row, tuple}
                or set(map(len, rows)) != {len(column.kinds)}):
            return False
        cols = list(zip(*rows, strict=True))
    for col, kind in zip(cols, column.kinds, strict=True):
        if set(map(type, col)) != {kind}:
            return False
        if kind is int:
            out.append(struct.pack(f">{n}q", *col))
        elif kind is bool:
            out.append(bytes(col))
        else:
            data = [x.encode() for x in col] if kind is str else col
            out.append(struct.pack(f">{n}I", *map(len, data)))
            out.append(b"".join(data))
    return True


def _unpack_column(data: bytes, pos: int, n: int, column: _Column, name: str
                   ) -> tuple[tuple, int]:
    """(the rows, the position after them) of a column field of `n` rows at `pos`."""
    if not n:
        return (), pos
    cols: list[Any] = []
    for kind in column.kinds:
        if kind is int:
            cols.append(struct.unpack_from(f">{n}q", data, pos))
            pos += 8 * n
        elif kind is bool:
            raw = data[pos : pos + n]
            if len(raw) != n or max(raw) > 1:
                raise ValueError(f"packed {name}: a bool column is not all 0 or 1")
            cols.append(tuple(map(bool, raw)))
            pos += n
        else:
            lengths = struct.unpack_from(f">{n}I", data, pos)
            pos += 4 * n
            ends = list(itertools.accumulate(lengths, initial=pos))
            if ends[-1] > len(data):
                raise ValueError(f"packed {name}: a column runs past the end")
            pieces = [data[a:b] for a, b in zip(ends, ends[1:], strict=False)]
            if kind is str:
                try:
                    pieces = [p.decode() for p in pieces]
                except UnicodeDecodeError as exc:
                    raise ValueError(f"packed {name}: {exc}") from None
            cols.append(tuple(pieces))
            pos = ends[-1]
    if column.row is None:
        return cols[0], pos
    return tuple(map(column.row._make, zip(*cols, strict=True))), pos


def pack(value: Any) -> bytes | None:
    """`value`'s packed bytes, or None if it does not fit the packed form."""
    return packer(type(value))(value)


@cache
def packer(cls: type) -> Callable[[Any], bytes | None]:
    """`pack` for records of `cls`, compiled as one function of the class's own: every
    result an apply makes is packed for the request-id memory, and a call per field and
    per check was most of that cost. Each field is read and its type tested in line, an
    empty str or bytes written without a call; a column field goes through
    `_pack_column`. It says None where `pack` would: a wrong type, an optional set, a
    value out of range or a str UTF-8 cannot hold."""
    sh = shape(cls)
    if sh is None:
        return _unpackable
    scope: dict[str, Any] = {"head": sh.head.pack, "count": bytes((len(sh.names),)),
                             "pack_column": _pack_column, "errors": _PACK_ERRORS}
    lines = ["def pack(v):"]
    lines += [f"    if v.{name} is not None:\n        return None" for name in sh.optional_none]
    fixed, tail = [], []
    for i, (name, kind) in enumerate(zip(sh.names, sh.types, strict=True)):
        lines += [f"    x{i} = v.{name}", f"    if type(x{i}) is not {kind.__name__}:",
                  "        return None"]
        fixed.append(f"x{i}")
    body = ["    try:"]
    columns = dict(sh.columns)
    for i, is_str in sh.variable:
        if is_str:
            body.append(f"        x{i} = x{i}.encode() if x{i} else b''")
        fixed[i] = f"len(x{i}) if x{i} else 0"
        tail.append(f"x{i}")
    if columns:
        body.append("        rows = []")
        for i, column in columns.items():
            scope[f"column{i}"] = column
            body.append(f"        if not pack_column(x{i}, column{i}, rows):\n"
                        "            return None")
            fixed[i] = f"len(x{i})"
        tail.append("b''.join(rows)")
    body += [f"        fixed = head({', '.join(fixed)})", "    except errors:",
             "        return None", "    return " + " + ".join(["count", "fixed", *tail])]
    exec("\n".join(lines + body), scope)  # noqa: S102
    return scope["pack"]


_PACK_ERRORS = (struct.error, UnicodeEncodeError)  # out of range; a lone surrogate


def _unpackable(value: Any) -> None:
    """The packer of a class with no packed form."""
    return None


def unpack(cls: type, data: bytes, offset: int) -> Any:
    """The `cls` record packed in `data` from `offset` (ValueError if it is not one)."""
    sh = shape(cls)
    name = cls.__name__
    if sh is None:
        raise ValueError(f"{name} has no packed form")
    if len(data) <= offset:
        raise ValueError(f"packed {name}: no field count")
    if data[offset] != len(sh.names):
        raise ValueError(f"packed {name}: {data[offset]} fields, not {len(sh.names)}")
    pos = offset + 1 + sh.head.size
    if len(data) < pos:
        raise ValueError(f"packed {name}: {len(data)} bytes, too short")
    for at in sh.bool_at:
        if data[offset + 1 + at] > 1:
            raise ValueError(f"packed {name}: a bool byte is {data[offset + 1 + at]}")
    values = list(sh.head.unpack_from(data, offset + 1))
    for i, is_str in sh.variable:
        end = pos + values[i]
        piece = data[pos:end]
        if is_str:
            try:
                piece = piece.decode()
            except UnicodeDecodeError as exc:
                raise ValueError(f"packed {name}: {exc}") from None
        values[i] = piece
        pos = end
    try:
        for i, column in sh.columns:
            values[i], pos = _unpack_column(data, pos, values[i], column, name)
    except struct.error:
        raise ValueError(f"packed {name}: a column runs past the end") from None
    if pos != len(data):
        raise ValueError(f"packed {name}: {len(data) - pos} bytes too many or few")
    if sh.positional and not sh.optional_none:
        return cls(*values)
    fields = dict(zip(sh.names, values, strict=True))
    for opt in sh.optional_none:
        fields[opt] = None
    return cls(**fields)
