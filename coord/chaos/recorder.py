"""Recording a run's oplog in the JSONL format the checkers and the audit read
(coord.check.oplog): invoke, then ok/fail/info, with time.monotonic_ns() times.

A worker is a sequence of processes: after an op with an unknown outcome ("info") its
process may still have that op in flight, so the worker continues as a fresh process
(Jepsen's rule), keeping "one outstanding op per process" true."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coord.chaos.nemesis import Fault


class Recorder:
    """Thread-safe; rows are appended to `path` as they happen (a crashed run keeps its
    oplog) and counted for the live summary."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._index = 0
        self.counts: Counter[tuple[str, str]] = Counter()  # (f, type) -> rows

    def record(self, row: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            row = {"index": self._index, **row}
            self._index += 1
            self._file.write(json.dumps(row, separators=(",", ":")) + "\n")
            if row["type"] != "invoke":
                self.counts[(row["f"], row["type"])] += 1
        return row

    def close(self) -> None:
        with self._lock:
            self._file.close()


class FaultLog:
    """A run's `faults.jsonl` while it runs: a fault's line is appended and flushed as it
    starts and again as it ends, so a harness killed mid-run leaves every fault it began
    (the checkers excuse anomalies inside fault windows, and a run without its faults
    would flag what they caused): one still held then has no end, an open window.
    `latest_faults` reads such a file, each fault's last line. `close` then writes the
    file whole, one line per fault in start order, with its final record (a fault ended
    twice, by its own heal and by `heal_all`, keeps the later end). A write that fails
    (a full disk) is kept in `error` and the run goes on; `close` writes it all again,
    and the run's end prints `warning`.
    Thread-safe: faults start and end in their own threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: OSError | None = None
        self._written_whole = False  # by `close`
        self._lock = threading.Lock()
        self._file: IO[str] | None = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def record(self, fault: Fault) -> None:
        """Append `fault` as it is now (started, or ended)."""
        with self._lock:
            if self._file is not None and self.error is None:
                try:
                    self._file.write(json.dumps(fault.to_json()) + "\n")
                    self._file.flush()
                except OSError as e:
                    self.error = e

    def warning(self) -> str | None:
        """What the run's end says if an append failed while the run went on (None if
        none did). Appends stop at the first failure, so a harness killed before the end
        would have left only what came before it: the faults begun later missing, and any
        not ended by then with no end (never healed, their windows open to the run's
        end). Whether `close` then wrote the file whole is said too."""
        if self.error is None:
            return None
        after = ("it was written whole at the end" if self._written_whole
                 else "it was not written whole at the end either")
        return (f"{self.path} could not be appended during the run ({self.error}); {after}, "
                "but a run killed before then keeps only what was written before the "
                "failure: faults begun later are missing, and any not yet ended then count "
                "as never healed")

    def close(self, faults: list[Fault]) -> None:
        """Replace what was appended with `faults`, the run's every fault, in order."""
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):  # what close flushes is rewritten
                    self._file.close()
                self._file = None
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(json.dumps(f.to_json()) + "\n" for f in faults),
                           encoding="utf-8")
            os.replace(tmp, self.path)
            self._written_whole = True


def latest_faults(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The faults of a `faults.jsonl`'s rows, each as its last line says (a run killed
    mid-way left a line as each began and another as each ended), in start order."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        latest[(row.get("kind"), row.get("member"), row.get("start_ns"))] = row
    return list(latest.values())


class Process:
    """One logical client process: `invoke()` then exactly one of `ok/fail/info()`.
    Every row names its `worker` (the id it started with), which stays when the process
    id moves on after an unknown outcome: the report draws a worker's ops on one lane."""

    def __init__(self, recorder: Recorder, worker: int, workers: int) -> None:
        self.recorder = recorder
        self.worker = worker
        self.id = worker
        self._step = workers
        self._pending: dict[str, Any] | None = None

    def invoke(self, f: str, key: str | None = None, value: Any = None,
               **fields: Any) -> None:
        assert self._pending is None, "one outstanding op per process"
        self._pending = {"process": self.id, "type": "invoke", "f": f, "key": key,
                         "value": value, "time_ns": time.monotonic_ns(), "error": None,
                         "worker": self.worker, **fields}
        self.recorder.record(self._pending)

    def _record(self, inv: dict[str, Any], kind: str, value: Any, fields: dict) -> None:
        """A row after `inv`: its fields, then this row's."""
        base = {k: v for k, v in inv.items() if k not in ("index", "type", "time_ns")}
        self.recorder.record({**base, "type": kind, "value": value,
                              "time_ns": time.monotonic_ns(), **fields})

    def _complete(self, kind: str, value: Any, error: str | None, fields: dict) -> None:
        inv, self._pending = self._pending, None
        assert inv is not None, "complete without invoke"
        self._record(inv, kind, value, {"error": error, **fields})

    def respond(self, value: Any = None, **fields: Any) -> None:
        """One message of the outstanding op's stream (a `response` row): a watch
        delivers many before it completes. Safe from another thread than the one that
        completes the op only if the caller orders the two (see etcd_watchers.WatchStream)."""
        inv = self._pending
        assert inv is not None, "a response with no outstanding op"
        self._record(inv, "response", value, fields)

    def ok(self, value: Any = None, **fields: Any) -> None:
        self._complete("ok", value, None, fields)

    def fail(self, error: str, value: Any = None, **fields: Any) -> None:
        self._complete("fail", value, error, fields)

    def info(self, error: str, value: Any = None, **fields: Any) -> None:
        """Outcome unknown: this process is done; the worker goes on as a new one. The
        row keeps what was asked (the invoke's value) unless told otherwise."""
        if value is None and self._pending is not None:
            value = self._pending.get("value")
        self._complete("info", value, error, fields)
        self.id += self._step
