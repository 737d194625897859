"""Converters between a record and its plain JSON object, compiled per record class.

`coord.sm.canonical_json` converts a record field by field, each through its type's
converter: clear, and every refusal names its field, but a call per field, and a txn's
puts decode at every member and at every export, its results encode at every member.
Here a record class gets one function of its own whose int, bool, str and bytes fields
are tested in line; anything it does not accept goes to the field-by-field converter
(`checked`), which gives the same value or refuses with its exact error.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any

from coord.sm.limits import INT64_MAX, INT64_MIN

Converter = Callable[[Any], Any]

INLINE_CHECKS = {
    int: "type({x}) is not int or not INT64_MIN <= {x} <= INT64_MAX",
    bool: "type({x}) is not bool",
    str: "type({x}) is not str",
}


def inlined_encoder(cls: type, fields: list[tuple[str, Any]], tagged: bool, union_tag: str,
                    checked: Converter, encoder: Callable[[Any], Converter]) -> Converter:
    """`checked`, made as one function of `cls`'s own, as `inlined_decoder` is: each int,
    bool, str and bytes field tested (and a bytes one written as base64) in line; for a
    value it does not accept, `checked` gives the plain object or the exact error."""
    keys = [repr(name) for name, _ in fields] + ([repr(union_tag)] if tagged else [])
    tag = [repr(cls.__name__)] if tagged else []

    def plain_object(xs: list[str]) -> str:
        return "{" + ", ".join(f"{k}: {x}" for k, x in zip(keys, xs + tag, strict=True)) + "}"

    return _compiled(
        ["    if type(v) is not cls:", "        return checked(v)"], fields, "v.{name}",
        ["    if type({x}) is not bytes:", "        return checked(v)",
         "    {x} = b2a({x}, newline=False).decode('ascii')"], encoder, plain_object,
        {"checked": checked, "cls": cls})


def inlined_decoder(cls: type, fields: list[tuple[str, Any]], expected: set[str],
                    positional: bool, checked: Converter,
                    decoder: Callable[[Any], Converter]) -> Converter:
    """`checked`, made as one function of `cls`'s own: each int, bool, str and bytes field
    tested in line rather than by a converter's call (a txn's puts decode at every
    member, and at every export, field by field). It decodes what `checked` decodes; for
    anything else it hands the value to `checked`, which refuses it with its exact error
    (fields are tested in the same order, so the first bad one is the one named)."""
    return _compiled(
        ["    if type(v) is not dict or v.keys() != expected:", "        return checked(v)"],
        fields, "v[{name!r}]",
        ["    if type({x}) is not str:", "        return checked(v)", "    try:",
         "        raw = a2b({x})", "    except B64_ERRORS:", "        return checked(v)",
         "    if b2a(raw, newline=False).decode('ascii') != {x}:", "        return checked(v)",
         "    {x} = raw"], decoder,
        lambda xs: "cls(" + ", ".join(xs if positional else [
            f"{name}={x}" for (name, _), x in zip(fields, xs, strict=True)]) + ")",
        {"expected": expected, "checked": checked, "cls": cls})


def _compiled(head: list[str], fields: list[tuple[str, Any]], read: str, bytes_lines: list[str],
              converter: Callable[[Any], Converter], result: Callable[[list[str]], str],
              scope: dict[str, Any]) -> Converter:
    """The source of a record's inlined converter, compiled: `head`, then per field its
    value read (`read`, of the field's name) into a local and tested in line (ints,
    bools and strs as `INLINE_CHECKS` says, bytes by `bytes_lines`) or converted by the
    field type's `converter`; it returns the expression `result` makes of the locals."""
    lines = ["def convert(v):", *head]
    scope.update(INT64_MIN=INT64_MIN, INT64_MAX=INT64_MAX, a2b=binascii.a2b_base64,
                 b2a=binascii.b2a_base64, B64_ERRORS=(binascii.Error, ValueError))
    xs = []
    for i, (name, hint) in enumerate(fields):
        x = f"x{i}"
        lines.append(f"    {x} = {read.format(name=name)}")
        if hint in INLINE_CHECKS:
            lines += [f"    if {INLINE_CHECKS[hint].format(x=x)}:", "        return checked(v)"]
        elif hint is bytes:
            lines += [line.format(x=x) for line in bytes_lines]
        else:
            scope[f"c{i}"] = converter(hint)
            lines.append(f"    {x} = c{i}({x})")
        xs.append(x)
    lines.append(f"    return {result(xs)}")
    exec("\n".join(lines), scope)  # noqa: S102
    return scope["convert"]
