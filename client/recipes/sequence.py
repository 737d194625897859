"""Per-(pid, partition) sequence checking for a sink that must not store duplicates.

The specification's broker-side rule, embeddable in any sink: keep one high-water
sequence and one generation per (pid, partition) and accept a write iff

  - its generation equals the stored one or is exactly one greater (a greater one is a
    new instance of the producer; accepting it fences the older instance), and
  - its sequence is exactly high-water + 1 (the first write of a new (pid, partition)
    must be sequence 0, at any generation: a leased pid starts at a random one).

A generation bump does NOT reset the sequence: per the specification, a restarted
producer resumes from its saved (pid, sequence) with the next generation, and its first
sends may be reported as duplicates. Verdicts, checked in this order: a generation below
the stored one or more than one above it is FENCED_GENERATION; a sequence at or below
the high water is DUPLICATE_SEQUENCE (already stored, safe to treat as success); any
other gap is OUT_OF_ORDER_SEQUENCE. Only ACCEPT changes state. pid 0 means "not
idempotent" and is always accepted without tracking.

`SequenceValidator(restart_on_new_generation=True)` is the transactional producer's rule
instead (Kafka's InitProducerId epoch bump, and a Spark task attempt that rewrites its
whole partition): any generation above the stored one is a new instance that starts
again at sequence 0 (so only sequence 0 is accepted there, and accepting it fences every
lower generation); a lower one is FENCED_GENERATION as before. `remember` loads one
entry kept elsewhere (a sink's own fence row), so a sink that persists the high water in
its own transaction judges with these same rules.
"""

from __future__ import annotations

import struct
from enum import StrEnum


class Verdict(StrEnum):
    ACCEPT = "ACCEPT"
    DUPLICATE_SEQUENCE = "DUPLICATE_SEQUENCE"
    OUT_OF_ORDER_SEQUENCE = "OUT_OF_ORDER_SEQUENCE"
    FENCED_GENERATION = "FENCED_GENERATION"


ACCEPT = Verdict.ACCEPT
DUPLICATE_SEQUENCE = Verdict.DUPLICATE_SEQUENCE
OUT_OF_ORDER_SEQUENCE = Verdict.OUT_OF_ORDER_SEQUENCE
FENCED_GENERATION = Verdict.FENCED_GENERATION

_MAGIC = b"CSQV"
_VERSION = 1
_HEADER = struct.Struct(">4sBQ")  # magic, version, entry count
_ENTRY = struct.Struct(">qqqq")  # pid, partition, generation, high-water sequence


def _check(name: str, value: int) -> None:
    if type(value) is not int or not 0 <= value < (1 << 63):
        raise ValueError(f"{name} must be a non-negative int64, got {value!r:.40}")


class SequenceValidator:
    def __init__(self, restart_on_new_generation: bool = False) -> None:
        self.restart_on_new_generation = restart_on_new_generation
        self._state: dict[tuple[int, int], tuple[int, int]] = {}  # -> (generation, highwater)

    def __len__(self) -> int:
        return len(self._state)

    def check(self, pid: int, partition: int, generation: int, seq: int) -> Verdict:
        """Judge one write and record it if accepted (ValueError for negative fields)."""
        for name, value in (("pid", pid), ("partition", partition),
                            ("generation", generation), ("seq", seq)):
            _check(name, value)
        if pid == 0:
            return ACCEPT
        key = (pid, partition)
        stored = self._state.get(key)
        if stored is None:
            if seq != 0:
                return OUT_OF_ORDER_SEQUENCE
            self._state[key] = (generation, 0)
            return ACCEPT
        stored_generation, highwater = stored
        if self.restart_on_new_generation and generation > stored_generation:
            if seq != 0:
                return OUT_OF_ORDER_SEQUENCE
            self._state[key] = (generation, 0)
            return ACCEPT
        if generation not in (stored_generation, stored_generation + 1):
            return FENCED_GENERATION
        if seq <= highwater:
            return DUPLICATE_SEQUENCE
        if seq != highwater + 1:
            return OUT_OF_ORDER_SEQUENCE
        self._state[key] = (generation, seq)
        return ACCEPT

    def highwater(self, pid: int, partition: int) -> tuple[int, int] | None:
        """(generation, high-water sequence) for (pid, partition), or None if unseen."""
        return self._state.get((pid, partition))

    def remember(self, pid: int, partition: int, generation: int, highwater: int) -> None:
        """Set (pid, partition)'s state, e.g. from a fence row the caller stores itself."""
        for name, value in (("pid", pid), ("partition", partition),
                            ("generation", generation), ("highwater", highwater)):
            _check(name, value)
        if pid == 0:
            raise ValueError("pid 0 is never tracked")
        self._state[(pid, partition)] = (generation, highwater)

    def forget(self, pid: int) -> None:
        """Drop a pid's state (e.g. once its lease has expired and it can never return)."""
        for key in [k for k in self._state if k[0] == pid]:
            del self._state[key]

    def snapshot(self) -> bytes:
        """Deterministic bytes: entries sorted by (pid, partition)."""
        parts = [_HEADER.pack(_MAGIC, _VERSION, len(self._state))]
        parts.extend(_ENTRY.pack(pid, part, gen, hw)
                     for (pid, part), (gen, hw) in sorted(self._state.items()))
        return b"".join(parts)

    def restore(self, data: bytes) -> None:
        """Replace the state with a snapshot's; ValueError (state untouched) if malformed."""
        if len(data) < _HEADER.size:
            raise ValueError("sequence snapshot too short")
        magic, version, count = _HEADER.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError("not a sequence-validator snapshot (or unknown version)")
        if len(data) != _HEADER.size + count * _ENTRY.size:
            raise ValueError("sequence snapshot has the wrong length")
        state: dict[tuple[int, int], tuple[int, int]] = {}
        previous: tuple[int, int] | None = None
        for pid, part, gen, hw in _ENTRY.iter_unpack(data[_HEADER.size:]):
            if min(pid, part, gen, hw) < 0 or pid == 0:
                raise ValueError("negative field or pid 0 in sequence snapshot")
            if previous is not None and (pid, part) <= previous:
                raise ValueError("sequence snapshot entries out of order")
            previous = (pid, part)
            state[(pid, part)] = (gen, hw)
        self._state = state
