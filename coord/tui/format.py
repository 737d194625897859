"""How the console writes values: durations, sizes, times, keys and values (text, JSON
or hex), and filters (`/text`, `/!text` inverts)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

VALUE_MODES = ("text", "json", "hex")


def duration_ms(ms: int) -> str:
    if ms < 0:
        return "?"
    if ms < 10_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def size(n: int) -> str:
    if n <= 0:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(wall))


def key_text(key: bytes) -> str:
    """A key as text when it is UTF-8, else escaped."""
    try:
        return key.decode()
    except UnicodeDecodeError:
        return repr(key)[2:-1]


def value_text(value: bytes, mode: str) -> str:
    """`value` shown as text, indented JSON (if it parses) or a hex dump."""
    if mode == "hex":
        lines = []
        for at in range(0, len(value), 16):
            chunk = value[at:at + 16]
            printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
            lines.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
        return "\n".join(lines) or "(empty)"
    if mode == "json":
        try:
            return json.dumps(json.loads(value), indent=2, sort_keys=True)
        except (ValueError, UnicodeDecodeError):
            return "(not JSON) " + value_text(value, "text")
    try:
        return value.decode()
    except UnicodeDecodeError:
        return "(binary: press v for hex) " + repr(value)[2:-1]


def short_value(value: bytes, width: int = 40) -> str:
    text = value_text(value, "text").replace("\n", "⏎")
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class Filter:
    """`/text` keeps rows containing text (case-insensitive); `/!text` the others."""

    text: str = ""
    invert: bool = False

    @classmethod
    def parse(cls, raw: str) -> Filter:
        raw = raw.strip()
        if raw.startswith("!"):
            return cls(raw[1:].strip().lower(), True)
        return cls(raw.lower(), False)

    def __bool__(self) -> bool:
        return bool(self.text)

    def keeps(self, haystack: str) -> bool:
        if not self.text:
            return True
        return (self.text in haystack.lower()) != self.invert

    def __str__(self) -> str:
        return ("!" if self.invert else "") + self.text
