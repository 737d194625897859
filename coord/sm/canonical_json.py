"""Deterministic conversion between typed records and canonical JSON.

Every member must turn the same command (or state) into the same bytes and must refuse
anything that is not exactly what the types declare, so conversion is driven by the
type hints of frozen dataclasses and NamedTuples: ints (int64, never bool), strs, bools,
bytes as canonical base64, tuples, optionals and tagged unions of dataclasses (which may
be recursive: a txn holds txns). Output is compact JSON with sorted keys, every field
written; decoding refuses a missing or extra field. Converters are built once per type
and cached.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

from coord.sm import compiled_records
from coord.sm.limits import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH

UNION_TAG = "@"

Converter = Callable[[Any], Any]


# Built once: json.dumps/json.loads with options build a new encoder/decoder per call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def dumps(plain: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, ASCII only."""
    return _ENCODER.encode(plain).encode()


@dataclasses.dataclass(slots=True, eq=False)
class Lazy:
    """A list whose items become plain values only when `iter_dumps` reaches them, a
    slice at a time (a snapshot's keys and histories: converting them is the slow part).
    `slice_len` (default: `iter_dumps`'s) is how many items make one piece: 1 when each
    item is itself a chunk of records."""

    items: Sequence[Any]
    convert: Converter
    slice_len: int | None = None


@dataclasses.dataclass(slots=True, eq=False)
class Pieces:
    """A value whose JSON text a generator gives in pieces of its own making (joined, it is
    exactly what `dumps` would write for the value): for a state part whose conversion
    must itself be spread over pieces, such as sorting (see ownership's capture)."""

    pieces: Iterator[str]


def encode_text(plain: Any) -> str:
    """`dumps`, as text."""
    return _ENCODER.encode(plain)


def iter_dumps(plain: Any, slice_len: int = 500) -> Iterator[str]:
    """`dumps` in pieces (joined and encoded, exactly its bytes, with each `Lazy` as the
    list of its converted items): long lists go a slice at a time, so the caller can do
    other work between pieces. The event loop serializes a large snapshot this way."""
    encode = _ENCODER.encode
    if type(plain) is dict and all(type(k) is str for k in plain):
        yield "{"
        for i, key in enumerate(sorted(plain)):
            yield ("," if i else "") + encode(key) + ":"
            yield from iter_dumps(plain[key], slice_len)
        yield "}"
    elif type(plain) is Pieces:
        yield from plain.pieces
    elif type(plain) is Lazy or (type(plain) is list and len(plain) > slice_len):
        items, convert, step = ((plain.items, plain.convert, plain.slice_len or slice_len)
                                if type(plain) is Lazy else (plain, None, slice_len))
        yield "["
        for start in range(0, len(items), step):
            chunk = items[start:start + step]
            text = encode(chunk if convert is None else [convert(x) for x in chunk])
            yield ("," if start else "") + text[1:-1]
        yield "]"
    else:
        yield encode(plain)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate JSON key {key!r}")
            seen.add(key)
    return out


def _no_floats(text: str) -> Any:
    raise ValueError(f"non-integer number {text!r}")


DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_pairs, parse_float=_no_floats, parse_constant=_no_floats
)


TOO_DEEP = f"malformed JSON: nested deeper than {MAX_JSON_DEPTH}"


def loads(data: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no floats, NaN or Infinity, nested at most
    MAX_JSON_DEPTH deep (the same refusal, word for word, wherever the decoder's own
    recursion would give up)."""
    try:
        text = data.decode("utf-8")
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        plain = DECODER.decode(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"malformed JSON: {exc}") from None
    # Each level of nesting opens with a bracket of its own: text with no more brackets
    # than the limit (inside strings or not) cannot nest past it, and needs no walk.
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and deeper_than(plain,
                                                                          MAX_JSON_DEPTH):
        raise ValueError(TOO_DEEP)
    return plain


def deeper_than(plain: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` deep (without recursing)."""
    stack = [(plain, 1)] if type(plain) in (list, dict) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        items = value.values() if type(value) is dict else value
        stack.extend((x, depth + 1) for x in items if type(x) in (list, dict))
    return False


def to_plain(hint: Any, value: Any) -> Any:
    return encoder(hint)(value)


def from_plain(hint: Any, plain: Any) -> Any:
    return decoder(hint)(plain)


# -- scalars -----------------------------------------------------------------------------


def _enc_int(v: Any) -> int:
    if type(v) is not int or not INT64_MIN <= v <= INT64_MAX:
        raise ValueError(f"expected an int64, got {v!r:.80}")
    return v


def _enc_bool(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError(f"expected a bool, got {v!r:.80}")
    return v


def _enc_str(v: Any) -> str:
    if type(v) is not str:
        raise ValueError(f"expected a str, got {v!r:.80}")
    return v


def _enc_bytes(v: Any) -> str:
    if type(v) is not bytes:
        raise ValueError(f"expected bytes, got {v!r:.80}")
    return base64.b64encode(v).decode("ascii")


def _dec_bytes(v: Any) -> bytes:
    """Only canonical base64 (what `_enc_bytes` writes) decodes: whatever the lenient C
    decoder makes of `v`, it must encode back to exactly `v`, which refuses stray or
    non-ASCII characters, missing or extra padding and non-zero pad bits alike. (binascii
    directly, not base64's wrappers: a snapshot decodes millions of these.)"""
    if type(v) is not str:
        raise ValueError(f"expected base64 text, got {v!r:.80}")
    try:
        raw = binascii.a2b_base64(v)
    except (binascii.Error, ValueError):
        raise ValueError(f"invalid base64 {v!r:.80}") from None
    if binascii.b2a_base64(raw, newline=False).decode("ascii") != v:
        raise ValueError(f"non-canonical base64 {v!r:.80}")
    return raw


_SCALARS: dict[Any, tuple[Converter, Converter]] = {
    int: (_enc_int, _enc_int),
    bool: (_enc_bool, _enc_bool),
    str: (_enc_str, _enc_str),
    bytes: (_enc_bytes, _dec_bytes),
}


_SCALAR_KINDS = (int, str, bool)


def _flat_converter(kinds: tuple, build: Callable[[Any], Any], check_list: bool) -> Converter:
    """Fast path for NamedTuples of ints/strs/bools (claims, grants): one loop, no calls."""
    n = len(kinds)

    def conv(v: Any) -> Any:
        if (type(v) is not list) if check_list else (not isinstance(v, tuple)):
            raise ValueError(f"expected a list of {n}, got {v!r:.80}")
        if len(v) != n:
            raise ValueError(f"expected {n} items, got {v!r:.80}")
        for x, kind in zip(v, kinds, strict=True):
            if type(x) is not kind or (kind is int and not INT64_MIN <= x <= INT64_MAX):
                raise ValueError(f"expected {kind.__name__}, got {x!r:.80}")
        return build(v)

    return conv


def _flat_rows(hint: Any, decode: bool) -> Converter | None:
    """For `tuple[hint, ...]` with `hint` a NamedTuple of ints/strs/bools (an own's claims,
    its grants): `_flat_converter`'s checks made a column at a time by C loops, not a field
    at a time by Python's (an own of 10,000 resources decodes 10,000 claims on every
    member). Any row that fails is run through the per-row converter for its exact
    error. None for other hints."""
    if not is_namedtuple(hint):
        return None
    kinds = tuple(h for _, h in record_fields(hint))
    if not all(k in _SCALAR_KINDS for k in kinds):
        return None
    row = _flat_converter(kinds, hint._make if decode else list, check_list=decode)
    lengths = {len(kinds)}

    def rows_ok(v: Any) -> bool:
        row_types = set(map(type, v))
        if not (row_types == {list} if decode else all(issubclass(t, tuple) for t in row_types)):
            return False
        if set(map(len, v)) != lengths:
            return False
        for kind, column in zip(kinds, zip(*v, strict=True), strict=True):
            if set(map(type, column)) != {kind}:
                return False
            if kind is int and not (INT64_MIN <= min(column) and max(column) <= INT64_MAX):
                return False
        return True

    def conv(v: Any) -> Any:
        if decode and type(v) is not list:
            raise ValueError(f"expected a list, got {v!r:.80}")
        v = v if decode else _seq(v)
        if v and not rows_ok(v):
            for x in v:
                row(x)  # raises for the first bad row
        return tuple(map(hint._make, v)) if decode else list(map(list, v))

    return conv


def is_namedtuple(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields")


def _seq(v: Any) -> tuple | list:
    if not isinstance(v, (tuple, list)):
        raise ValueError(f"expected a sequence, got {v!r:.80}")
    return v


def record_fields(cls: type) -> list[tuple[str, Any]]:
    """(name, type hint) of each field of dataclass or NamedTuple `cls`, in order."""
    hints = typing.get_type_hints(cls)
    if dataclasses.is_dataclass(cls):
        return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]
    return [(name, hints[name]) for name in cls._fields]


# -- encoders ----------------------------------------------------------------------------


@cache
def encoder(hint: Any) -> Converter:
    """A function turning a value of type `hint` into plain JSON data (or ValueError)."""
    if hint in _SCALARS:
        return _SCALARS[hint][0]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_encoder(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            rows = _flat_rows(args[0], decode=False)
            if rows is not None:
                return rows
            item = encoder(args[0])
            return lambda v: [item(x) for x in _seq(v)]
        items = [encoder(a) for a in args]

        def enc_fixed(v: Any) -> list:
            if len(_seq(v)) != len(items):
                raise ValueError(f"expected {len(items)} items, got {v!r:.80}")
            return [e(x) for e, x in zip(items, v, strict=True)]

        return enc_fixed
    if is_namedtuple(hint):
        kinds = tuple(h for _, h in record_fields(hint))
        if all(k in _SCALAR_KINDS for k in kinds):
            return _flat_converter(kinds, list, check_list=False)
        return encoder(tuple[kinds])
    if dataclasses.is_dataclass(hint):
        return _dataclass_encoder(hint, tagged=False)
    raise TypeError(f"unsupported type {hint!r}")


def _dataclass_encoder(cls: type, tagged: bool) -> Converter:
    return compiled_records.inlined_encoder(cls, record_fields(cls), tagged, UNION_TAG,
                                            checked_dataclass_encoder(cls, tagged), encoder)


def checked_dataclass_encoder(cls: type, tagged: bool) -> Converter:
    """A `cls` record as a plain object, each field by its type's converter: the encoder
    that names what is wrong with a value that is not one."""
    names = [(name, encoder(h)) for name, h in record_fields(cls)]

    def enc(v: Any) -> dict:
        if type(v) is not cls:
            raise ValueError(f"expected {cls.__name__}, got {type(v).__name__}")
        out = {name: e(getattr(v, name)) for name, e in names}
        if tagged:
            out[UNION_TAG] = cls.__name__
        return out

    return enc


def _union_encoder(args: tuple) -> Converter:
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    if len(members) == 1:
        inner = encoder(members[0])
        return lambda v: None if v is None else inner(v)
    if not all(dataclasses.is_dataclass(m) for m in members):
        raise TypeError(f"unions must be of dataclasses: {args!r}")
    # Members' converters are built on first use, so a member may contain the union itself.
    by_type: dict[type, Converter] = {}

    def enc(v: Any) -> Any:
        if v is None and optional:
            return None
        e = by_type.get(type(v))
        if e is None:
            if type(v) not in members:
                raise ValueError(
                    f"{type(v).__name__} is not one of {[m.__name__ for m in members]}")
            e = by_type[type(v)] = _dataclass_encoder(type(v), tagged=True)
        return e(v)

    return enc


# -- decoders ----------------------------------------------------------------------------


@cache
def decoder(hint: Any) -> Converter:
    """A function turning plain JSON data into a value of type `hint` (or ValueError)."""
    if hint in _SCALARS:
        return _SCALARS[hint][1]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            rows = _flat_rows(args[0], decode=True)
            if rows is not None:
                return rows
            item = decoder(args[0])

            def dec_var(v: Any) -> tuple:
                if type(v) is not list:
                    raise ValueError(f"expected a list, got {v!r:.80}")
                return tuple([item(x) for x in v])

            return dec_var
        items = [decoder(a) for a in args]
        return _fixed_decoder(items, tuple)
    if is_namedtuple(hint):
        kinds = tuple(h for _, h in record_fields(hint))
        if all(k in _SCALAR_KINDS for k in kinds):
            return _flat_converter(kinds, hint._make, check_list=True)
        items = [decoder(h) for h in kinds]
        return _fixed_decoder(items, lambda values: hint(*values))
    if dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint, tagged=False)
    raise TypeError(f"unsupported type {hint!r}")


def _fixed_decoder(items: list[Converter], build: Callable[[Any], Any]) -> Converter:
    def dec(v: Any) -> Any:
        if type(v) is not list or len(v) != len(items):
            raise ValueError(f"expected a list of {len(items)}, got {v!r:.80}")
        return build([d(x) for d, x in zip(items, v, strict=True)])

    return dec


def _dataclass_decoder(cls: type, tagged: bool) -> Converter:
    fields = record_fields(cls)
    positional = not any(f.kw_only for f in dataclasses.fields(cls))
    expected = {name for name, _ in fields} | ({UNION_TAG} if tagged else set())
    return compiled_records.inlined_decoder(cls, fields, expected, positional,
                                            checked_dataclass_decoder(cls, tagged), decoder)


def checked_dataclass_decoder(cls: type, tagged: bool) -> Converter:
    """A `cls` record from its plain object, each field by its type's converter: the
    decoder that names what is wrong with a value that is not one."""
    names = [(name, decoder(h)) for name, h in record_fields(cls)]
    expected = {name for name, _ in names} | ({UNION_TAG} if tagged else set())
    # Built from positional values when no field is keyword-only: the faster call, and a
    # snapshot decodes millions of records.
    positional = not any(f.kw_only for f in dataclasses.fields(cls))

    def dec(v: Any) -> Any:
        if type(v) is not dict:
            raise ValueError(f"expected an object for {cls.__name__}, got {v!r:.80}")
        keys = v.keys()
        if keys != expected:
            raise ValueError(
                f"{cls.__name__} fields {sorted(keys)} != expected {sorted(expected)}"
            )
        if positional:
            return cls(*[d(v[name]) for name, d in names])
        return cls(**{name: d(v[name]) for name, d in names})

    return dec


def _union_decoder(args: tuple) -> Converter:
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    if len(members) == 1:
        inner = decoder(members[0])
        return lambda v: None if v is None else inner(v)
    by_name_type = {m.__name__: m for m in members}
    by_name: dict[str, Converter] = {}  # built on first use (recursive unions)

    def dec(v: Any) -> Any:
        if v is None and optional:
            return None
        if type(v) is not dict or v.get(UNION_TAG) not in by_name_type:
            raise ValueError(f"expected one of {sorted(by_name_type)}, got {v!r:.80}")
        name = v[UNION_TAG]
        d = by_name.get(name)
        if d is None:
            d = by_name[name] = _dataclass_decoder(by_name_type[name], tagged=True)
        return d(v)

    return dec
