"""Strict JSON (`canonical_json.loads`' rules) read from text that comes in pieces, the
big arrays an item at a time.

A snapshot of a million keys is hundreds of MB of JSON text. Decoded in one go, a member
held the compressed bytes, the text (twice: bytes, then str), every plain list and int of
the document and the state being built from them, all at once: its peak was several
times the state. Read here, only the text of one value at a time is held, and each item
of an array named in `hooks` is handed to its hook as soon as it is parsed (a snapshot's
key and history chunks become records there), so the plain form of only one chunk lives
at a time and the document's peak is the state plus a bounded buffer.

The objects on the way to a hooked array are read key by key; every other value is
decoded whole by the same decoder `loads` uses (no floats, no duplicate keys), and the
same depth limit holds for the document as a whole.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from coord.sm.canonical_json import DECODER, TOO_DEEP, deeper_than
from coord.sm.limits import MAX_JSON_DEPTH

__all__ = ["Hooks", "load_pieces", "utf8_pieces"]

Hooks = dict[tuple[str, ...], Callable[[Any], Any]]
"""Path of object keys to an array -> what each of its items becomes."""

_SPACE = re.compile(r"[ \t\n\r]*")


def utf8_pieces(pieces: Iterable[bytes]) -> Iterator[str]:
    """`pieces` decoded as one UTF-8 text (a character may straddle two pieces);
    ValueError for bytes that are not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        for piece in pieces:
            yield decoder.decode(piece)
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc}") from None


def load_pieces(pieces: Iterable[str], hooks: Hooks) -> Any:
    """The JSON document whose text is `pieces` joined, as `loads` would return it but
    for each array at a path in `hooks`: that array is the list of its items each passed
    through its hook. ValueError as `loads` gives it."""
    reader = _Reader(iter(pieces))
    try:
        if reader.peek() == "\ufeff":  # as json.loads refuses it
            raise ValueError("malformed JSON: Unexpected UTF-8 BOM")
        value = reader.node((), hooks, 1)
        if reader.peek() != "":
            raise ValueError(f"malformed JSON: extra data at char {reader.offset}")
        return value
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc.msg} at char {reader.offset}") from None


class _Reader:
    """The text not yet consumed: a buffer filled from the pieces as needed."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self._buf = ""
        self._pos = 0
        self._done = False
        self.offset = 0  # chars consumed before the buffer's start (for messages)

    def _more(self, at_least: int) -> bool:
        """Read pieces until the unconsumed text is `at_least` long or the text ends;
        whether any text came."""
        if self._done:
            return False
        rest = self._buf[self._pos:]
        self.offset += self._pos
        parts, have = [rest], len(rest)
        for piece in self._pieces:
            parts.append(piece)
            have += len(piece)
            if have >= at_least:
                break
        else:
            self._done = True
        self._buf, self._pos = "".join(parts), 0
        return have > len(rest)

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), not consumed."""
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more(1):
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"malformed JSON: expected {char!r} at char "
                             f"{self.offset + self._pos}")
        self._pos += 1

    def value(self, depth: int) -> Any:
        """The next whole value, decoded by `loads`' decoder. Decoded only once text
        follows it (a number cut at the buffer's end would read as a shorter number), so
        a value cut short is decoded again from its start with twice the text."""
        self.peek()
        want = 1 << 16
        while True:
            try:
                value, end = DECODER.raw_decode(self._buf, self._pos)
                if end < len(self._buf) or self._done:
                    break
            except json.JSONDecodeError:
                if self._done:
                    raise
            want = max(want, 2 * (len(self._buf) - self._pos))
            self._more(want)
        self._pos = end
        if deeper_than(value, MAX_JSON_DEPTH - depth + 1):
            raise ValueError(TOO_DEEP)
        return value

    def node(self, path: tuple[str, ...], hooks: Hooks, depth: int) -> Any:
        """The value at `path`: read key by key if a hooked array lies under it, an item at
        a time if it is one, else whole."""
        if depth > MAX_JSON_DEPTH:
            raise ValueError(TOO_DEEP)
        hook = hooks.get(path)
        if hook is not None:
            return self._array(hook, depth)
        if any(p[:len(path)] == path and len(p) > len(path) for p in hooks):
            return self._object(path, hooks, depth)
        return self.value(depth)

    def _array(self, hook: Callable[[Any], Any], depth: int) -> list:
        self.expect("[")
        out: list = []
        if self.peek() == "]":
            self._pos += 1
            return out
        while True:
            out.append(hook(self.value(depth + 1)))
            if self.peek() == "]":
                self._pos += 1
                return out
            self.expect(",")

    def _object(self, path: tuple[str, ...], hooks: Hooks, depth: int) -> dict:
        if self.peek() != "{":
            return self.value(depth)  # not an object: its reader refuses it as it is
        self._pos += 1
        out: dict[str, Any] = {}
        if self.peek() == "}":
            self._pos += 1
            return out
        while True:
            if self.peek() != '"':
                raise ValueError(f"malformed JSON: expected a key at char "
                                 f"{self.offset + self._pos}")
            key = self.value(depth)
            if key in out:
                raise ValueError(f"duplicate JSON key {key!r}")
            self.expect(":")
            out[key] = self.node((*path, key), hooks, depth + 1)
            if self.peek() == "}":
                self._pos += 1
                return out
            self.expect(",")
