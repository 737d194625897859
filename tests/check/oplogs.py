"""Building oplogs by hand for the checker tests: a small recorder that writes
the same rows the chaos harness writes, with explicit times."""

from __future__ import annotations

from typing import Any


class H:
    """`h.op(process, f, start, end, value=..., status="ok", out=...)` appends an invoke
    and (unless end is None) its completion; `out` is the completion's value (a read's
    result; defaults to the invoke's value)."""

    def __init__(self, key: str | None = "k") -> None:
        self.rows: list[dict[str, Any]] = []
        self.key = key

    def op(self, process: int, f: str, start: int, end: int | None, value: Any = None,
           status: str = "ok", out: Any = "same", **fields: Any) -> H:
        inv = {"index": len(self.rows), "process": process, "type": "invoke", "f": f,
               "key": fields.pop("key", self.key), "value": None if f == "read" else value,
               "time_ns": start, "error": None, **fields}
        self.rows.append(inv)
        if end is not None:
            done = dict(inv, index=len(self.rows), type=status, time_ns=end,
                        value=value if out == "same" else out,
                        error=None if status == "ok" else "planted")
            self.rows.append(done)
        return self

    def stream(self, process: int, f: str, t0: int, responses: list[tuple[int, list[dict]]],
               end: int, **fields: Any) -> H:
        """A streaming op: its invoke at t0, a `response` row per (time, items), each
        with the revision of its last item, and its ok at `end`."""
        base = {"process": process, "f": f, "error": None, **fields}
        self.rows.append({**base, "index": len(self.rows), "type": "invoke", "value": None,
                          "time_ns": t0})
        for t, items in responses:
            self.rows.append({**base, "index": len(self.rows), "type": "response",
                              "value": items, "revision": items[-1]["revision"],
                              "time_ns": t})
        self.rows.append({**base, "index": len(self.rows), "type": "ok", "value": None,
                          "time_ns": end})
        return self

    def sorted(self) -> list[dict[str, Any]]:
        """Rows in time order, as a recorder would have written them."""
        rows = sorted(self.rows, key=lambda r: (r["time_ns"], r["index"]))
        return [dict(r, index=i) for i, r in enumerate(rows)]
