"""The contract between the replicated log and what it replicates.

`apply` must be deterministic: everything it may depend on (including the leader's clock
reading, `time_ms`) is in its arguments, so every member computes the same state.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Protocol


class StateMachine(Protocol):
    def apply(self, index: int, term: int, time_ms: int, payload: bytes) -> bytes:
        """Apply one committed command; the return value goes back to the proposer."""

    def snapshot(self) -> bytes:
        """Serialize the whole state (taken at the last applied index)."""

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's."""

    def describe(self) -> dict:
        """A small JSON-able summary, for status and tests."""


class JournalMachine:
    """The smallest useful state machine: a hash chain over every applied command.

    Two members hold the same history iff their (count, digest) agree, which makes
    durability and agreement checkable from outside without a data model."""

    _STATE = struct.Struct(">QQ32s")

    def __init__(self) -> None:
        self.count = 0
        self.last_index = 0
        self.digest = bytes(32)

    def apply(self, index: int, term: int, time_ms: int, payload: bytes) -> bytes:
        self.count += 1
        self.last_index = index
        self.digest = hashlib.sha256(self.digest + payload).digest()
        return self.digest[:8]

    def snapshot(self) -> bytes:
        return self._STATE.pack(self.count, self.last_index, self.digest)

    def restore(self, data: bytes) -> None:
        self.count, self.last_index, self.digest = self._STATE.unpack(data)

    def describe(self) -> dict:
        return {"commands": self.count, "digest": self.digest.hex()[:16]}

    def summary_json(self) -> str:
        return json.dumps(self.describe(), sort_keys=True)
