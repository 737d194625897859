"""What a client command prints: etcdctl-style lines for a person or a pipe, or, with
--json, one JSON value per result in which no byte is lost."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import Any

from coord.client.results import KeyValue


def text(b: bytes) -> str:
    """Bytes for a human: UTF-8, undecodable bytes as \\x escapes."""
    return b.decode("utf-8", "backslashreplace")


def jsonable(obj: Any) -> Any:
    """Results as JSON values. Bytes become a str when they are UTF-8, else
    {"base64": "..."}, so nothing is lost or mangled."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, bytes):
        try:
            return obj.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(obj).decode()}
    if isinstance(obj, tuple | list):
        return [jsonable(x) for x in obj]
    if isinstance(obj, range):
        return {"start": obj.start, "stop": obj.stop}
    return obj


def message_dict(msg: Any) -> dict[str, Any]:
    """A protobuf message as JSON values: every field by its name, set or not, ints as
    numbers (not the protobuf JSON mapping's strings), bytes as `jsonable` writes them."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        one = message_dict if field.message_type is not None else jsonable
        out[field.name] = [one(v) for v in value] if field.is_repeated else one(value)
    return out


def emit(args: argparse.Namespace, obj: Any, lines: Callable[[], Iterable[str]]) -> None:
    """`obj` as JSON with --json, else the lines `lines()` makes of it."""
    if args.json:
        print(json.dumps(jsonable(obj)), flush=True)
    else:
        for line in lines():
            print(line, flush=True)


def kv_lines(kv: KeyValue) -> list[str]:
    return [text(kv.key), text(kv.value)]
