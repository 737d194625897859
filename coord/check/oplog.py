"""The oplog (client operation log) every checker reads: Jepsen/Porcupine-style JSONL
rows (`invoke`, then `ok`/`fail`/`info` from the same process), paired into operations.

One row per line: {"index", "process", "type", "f", "key", "value", "time_ns", "error",
...op fields}. An invoke and its completion share "process" (one outstanding op per
process); "info" (or no completion at all) means the outcome is unknown: the op may
have taken effect at any time after its invoke, or never.

A streaming op (a `watch`) also has `response` rows between its invoke and its
completion, one per message the stream delivered, on the op's process: pair() keeps them
on the op, in order, as `Op.responses`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INFINITY = float("inf")

TYPES = ("invoke", "ok", "fail", "info", "response")


class OplogError(ValueError):
    """An oplog row that breaks the format (says which row and why)."""


@dataclass(slots=True)
class Op:
    """One operation: its invoke row and its completion row (None if it never completed).
    `status` is the completion's type ("ok", "fail", "info"); a missing completion is
    "info". `end` is the completion time, or infinity when the outcome is unknown."""

    invoke: dict[str, Any]
    completion: dict[str, Any] | None
    status: str
    start: int
    end: float
    responses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def f(self) -> str:
        return self.invoke["f"]

    @property
    def process(self) -> int:
        return self.invoke["process"]

    def get(self, name: str, default: Any = None) -> Any:
        """A field of the op: the completion's if it has it (what the server answered),
        else the invoke's (what was asked)."""
        if self.completion is not None and self.completion.get(name) is not None:
            return self.completion[name]
        return self.invoke.get(name, default)

    def rows(self) -> list[dict[str, Any]]:
        return [self.invoke] + ([self.completion] if self.completion is not None else [])


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a JSONL oplog file; a bad line is an OplogError naming it. A last
    line that does not parse and has no newline is a row its writer was killed while
    writing (every row it finished ends in one): it is left out, not an error, so the
    file of a run killed half way is still read."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                if not line.endswith("\n"):  # only the last line can lack one
                    break
                raise OplogError(f"{path}:{n}: not JSON: {e}") from None
            if not isinstance(row, dict):
                raise OplogError(f"{path}:{n}: expected an object, got {type(row).__name__}")
            rows.append(row)
    return rows


def _check_row(row: dict[str, Any]) -> None:
    for name in ("process", "type", "f", "time_ns"):
        if name not in row:
            raise OplogError(f"row {row.get('index', '?')}: missing {name!r}: {row}")
    if row["type"] not in TYPES:
        raise OplogError(f"row {row.get('index', '?')}: unknown type {row['type']!r}")


def pair(rows: Iterable[dict[str, Any]]) -> list[Op]:
    """Invoke rows matched with their completions, in invoke order. A completion with no
    outstanding invoke on its process, or a second invoke while one is outstanding, is a
    OplogError: the oplog is not well formed."""
    pending: dict[int, dict[str, Any]] = {}
    ops: list[Op] = []
    order: dict[int, int] = {}  # process -> position in ops of its outstanding op
    for row in rows:
        _check_row(row)
        proc = row["process"]
        if row["type"] == "invoke":
            if proc in pending:
                raise OplogError(
                    f"row {row.get('index')}: process {proc} invoked while its op "
                    f"{pending[proc].get('index')} is outstanding")
            pending[proc] = row
            order[proc] = len(ops)
            ops.append(Op(row, None, "info", row["time_ns"], INFINITY))
            continue
        if row["type"] == "response":
            if proc not in pending:
                raise OplogError(f"row {row.get('index')}: a response with no open stream "
                                 f"on process {proc}")
            ops[order[proc]].responses.append(row)
            continue
        inv = pending.pop(proc, None)
        if inv is None:
            raise OplogError(f"row {row.get('index')}: {row['type']} with no invoke on "
                               f"process {proc}")
        op = ops[order.pop(proc)]
        op.completion = row
        op.status = row["type"]
        op.end = INFINITY if row["type"] == "info" else row["time_ns"]
        if op.end < op.start:
            raise OplogError(f"row {row.get('index')}: completes before its invoke")
    return ops


def by_key(rows: Iterable[dict[str, Any]], fs: Iterable[str] | None = None
           ) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by "key" (rows with no key left out), keeping their order; `fs`
    keeps only those functions (an invoke and its completion share f)."""
    wanted = None if fs is None else set(fs)
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        key = row.get("key")
        if key is None or (wanted is not None and row.get("f") not in wanted):
            continue
        out.setdefault(key, []).append(row)
    return out

