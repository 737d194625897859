"""`coord kv txn`'s script: an etcdctl-style transaction read from stdin (compares, a
blank line, the operations run if every compare holds, a blank line, the operations run
otherwise), parsed into a TxnBuilder. TxnSyntaxError names the offending line."""

from __future__ import annotations

import re
import shlex
from typing import Any, TypeVar

from coord.cli.client_commands.command import UsageError
from coord.client.txn import TxnBuilder

B = TypeVar("B", bound=TxnBuilder)


class TxnSyntaxError(UsageError, ValueError):
    """A malformed `coord kv txn` script; the message names the line."""


TXN_HELP = """\
Read a transaction from stdin, etcdctl style: compares, a blank line, the operations
run if every compare holds, a blank line, the operations run otherwise.

  compares (one per line)        value("KEY") = "VALUE"    version("KEY") = 0
                                 create("KEY") > 5         mod("KEY") != 7
                                 ops: = != < >   (val/ver are short for value/version)
  operations (one per line)      put KEY VALUE [--prev-kv]
                                 get KEY [RANGE_END] [--prefix] [--limit N] [--revision N]
                                 del KEY [RANGE_END] [--prefix] [--prev-kv]

Keys and values are shell-quoted words (use quotes for spaces). Lines starting with #
are comments. Start with a blank line for no compares. Example:

  version("lock") = 0

  put lock me

  get lock
"""

_COMPARE_RE = re.compile(
    r"^\s*(?P<target>[A-Za-z]+)\s*\((?P<key>.*)\)\s*(?P<op>!=|==|=|<|>)\s*(?P<rhs>.*?)\s*$"
)
_TARGETS = {"value": "value", "val": "value", "version": "version", "ver": "version",
            "create": "create", "mod": "mod"}


def _one_word(s: str, what: str, lineno: int) -> str:
    try:
        words = shlex.split(s)
    except ValueError as e:
        raise TxnSyntaxError(f"line {lineno}: {what}: {e}") from None
    if len(words) != 1:
        raise TxnSyntaxError(f"line {lineno}: {what} must be one (quoted) word, got {s!r}")
    return words[0]


def _parse_compare(line: str, lineno: int, txn: TxnBuilder) -> None:
    m = _COMPARE_RE.match(line)
    if m is None:
        raise TxnSyntaxError(f"line {lineno}: not a compare: {line!r} "
                             '(expected e.g. version("key") = 0)')
    target = _TARGETS.get(m["target"].lower())
    if target is None:
        raise TxnSyntaxError(f"line {lineno}: unknown compare target {m['target']!r} "
                             "(value, version, create, mod)")
    key = _one_word(m["key"], "compare key", lineno)
    rhs = _one_word(m["rhs"], "compare operand", lineno)
    if target == "value":
        txn.compare(key, target, m["op"], rhs)
        return
    try:
        number = int(rhs)
    except ValueError:
        raise TxnSyntaxError(f"line {lineno}: {target} compares take an integer, "
                             f"got {rhs!r}") from None
    txn.compare(key, target, m["op"], number)


def _parse_op(line: str, lineno: int, txn: TxnBuilder, success: bool) -> None:
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise TxnSyntaxError(f"line {lineno}: {e}") from None
    verb, rest = words[0].lower(), words[1:]
    flags = {w for w in rest if w in ("--prefix", "--prev-kv")}
    positional: list[str] = []
    numbers = {"--limit": 0, "--revision": 0}
    i = 0
    while i < len(rest):
        w = rest[i]
        if w in numbers:
            if i + 1 >= len(rest) or not rest[i + 1].isdigit():
                raise TxnSyntaxError(f"line {lineno}: {w} takes a non-negative integer")
            numbers[w] = int(rest[i + 1])
            i += 2
            continue
        if w.startswith("--") and w not in flags:
            raise TxnSyntaxError(f"line {lineno}: unknown option {w!r} for {verb}")
        if not w.startswith("--"):
            positional.append(w)
        i += 1
    if verb == "put":
        if len(positional) != 2 or flags - {"--prev-kv"} or any(numbers.values()):
            raise TxnSyntaxError(f"line {lineno}: usage: put KEY VALUE [--prev-kv]")
        key, value = positional
        put = txn.then_put if success else txn.else_put
        put(key, value, prev_kv="--prev-kv" in flags)
        return
    if verb in ("get", "range"):
        if not 1 <= len(positional) <= 2 or "--prev-kv" in flags:
            raise TxnSyntaxError(f"line {lineno}: usage: get KEY [RANGE_END] [--prefix] "
                                 "[--limit N] [--revision N]")
        op: Any = txn.then_get if success else txn.else_get
        options: dict[str, Any] = {"limit": numbers["--limit"], "revision": numbers["--revision"]}
    elif verb in ("del", "delete"):
        if not 1 <= len(positional) <= 2 or any(numbers.values()):
            raise TxnSyntaxError(f"line {lineno}: usage: del KEY [RANGE_END] [--prefix] "
                                 "[--prev-kv]")
        op = txn.then_delete if success else txn.else_delete
        options = {"prev_kv": "--prev-kv" in flags}
    else:
        raise TxnSyntaxError(f"line {lineno}: unknown operation {verb!r} (put, get, del)")
    if "--prefix" not in flags:
        op(positional[0], positional[1] if len(positional) == 2 else None, **options)
    elif len(positional) != 1:
        raise TxnSyntaxError(f"line {lineno}: --prefix takes no RANGE_END")
    else:
        op(prefix=positional[0], **options)


def parse_txn(script: str, txn: B | None = None) -> B | TxnBuilder:
    """Parse a `coord kv txn` script (see TXN_HELP) into `txn` (a fresh TxnBuilder if
    None) and return it. TxnSyntaxError names the offending line."""
    builder: TxnBuilder = txn if txn is not None else TxnBuilder()
    lines = script.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()  # trailing blank lines close the script, they are not sections
    section = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            section += 1
            if section > 2:
                raise TxnSyntaxError(f"line {lineno}: a txn has at most three sections "
                                     "(compares, success ops, failure ops)")
            continue
        if line.startswith("#"):
            continue
        try:
            if section == 0:
                _parse_compare(line, lineno, builder)
            else:
                _parse_op(line, lineno, builder, success=section == 1)
        except (ValueError, TypeError) as e:
            if isinstance(e, TxnSyntaxError):
                raise
            raise TxnSyntaxError(f"line {lineno}: {e}") from None
    return builder
