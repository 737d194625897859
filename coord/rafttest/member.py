"""A simulated member's own parts: the disk that survives its crashes, the state machine it
applies entries to, and the RawNode with the bookkeeping the checker and the faults keep
on it. The scenario tests (tests/raft) script the same disk and state machine."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from coord.raft.rawnode import RawNode
from coord.raft.types import NONE, Entry, EntryType, HardState, Ready, Role, Snapshot
from coord.rafttest.outcome import InvariantViolation


class Disk:
    """What survives a crash. `save` is step 1 of the Ready contract, done the way a careful
    store does it; it refuses (as a violation) anything that would lose committed data."""

    __slots__ = ("hard_state", "snapshot", "entries", "synced_hard_state")

    def __init__(
        self,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: list[Entry] | None = None,
    ) -> None:
        self.hard_state = hard_state or HardState()
        self.synced_hard_state = self.hard_state  # what survives a power loss
        self.snapshot = snapshot or Snapshot()
        self.entries: list[Entry] = list(entries or [])

    def power_loss(self) -> None:
        """Lose what was written without fsync: a hard state of a Ready that did not
        `must_sync` (entries and snapshots always sync, so only the commit index goes)."""
        self.hard_state = self.synced_hard_state

    def last_index(self) -> int:
        return self.snapshot.meta.index + len(self.entries)

    def save(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            if rd.snapshot.meta.index <= self.hard_state.commit:
                raise InvariantViolation(
                    "durability",
                    f"snapshot at {rd.snapshot.meta.index} would replace a log committed "
                    f"to {self.hard_state.commit}",
                )
            self.snapshot = rd.snapshot
            self.entries = []
        if rd.entries:
            first = rd.entries[0].index
            pos = first - self.snapshot.meta.index - 1
            if pos < 0 or pos > len(self.entries):
                raise InvariantViolation(
                    "ready contract",
                    f"entries from {first} do not follow the persisted log "
                    f"({self.snapshot.meta.index + 1}..{self.last_index()})",
                )
            if pos < len(self.entries) and first <= self.hard_state.commit:
                raise InvariantViolation(
                    "durability",
                    f"entries from {first} overwrite the persisted log committed to "
                    f"{self.hard_state.commit}",
                )
            del self.entries[pos:]
            self.entries.extend(rd.entries)
        if rd.hard_state is not None:
            old, new = self.hard_state, rd.hard_state
            if new.term < old.term or new.commit < old.commit:
                raise InvariantViolation("durability", f"hard state went back: {old} -> {new}")
            if new.term == old.term and old.vote != NONE and new.vote != old.vote:
                raise InvariantViolation(
                    "election safety",
                    f"durable vote in term {new.term} changed from {old.vote} to {new.vote}",
                )
            self.hard_state = new
        if rd.must_sync:
            self.synced_hard_state = self.hard_state
        if self.hard_state.commit > self.last_index():
            raise InvariantViolation(
                "durability",
                f"persisted commit {self.hard_state.commit} is past the persisted log "
                f"(last index {self.last_index()})",
            )

    def compact(self, snap: Snapshot) -> None:
        index, offset = snap.meta.index, self.snapshot.meta.index
        if index <= offset:
            return
        if index > self.last_index():
            raise InvariantViolation(
                "durability", f"compaction at {index} beyond persisted {self.last_index()}"
            )
        del self.entries[: index - offset]
        self.snapshot = snap


_ENTRY_HEADER = struct.Struct(">QQB")
_SM_HEADER = struct.Struct(">QQ")
_ZERO_DIGEST = bytes(16)


@dataclass(slots=True, eq=False)
class StateMachine:
    """The replicated state: how many entries were applied and a digest chained over all of
    them (so two members with equal digests applied exactly the same sequence)."""

    index: int = 0
    digest: bytes = _ZERO_DIGEST
    payloads: int = 0

    def apply(self, e: Entry) -> None:
        h = hashlib.blake2b(self.digest, digest_size=16)
        h.update(_ENTRY_HEADER.pack(e.index, e.term, int(e.type)))
        h.update(e.data)
        self.digest = h.digest()
        self.index = e.index
        if e.type is EntryType.NORMAL and e.data:
            self.payloads += 1

    def snapshot_data(self) -> bytes:
        return _SM_HEADER.pack(self.index, self.payloads) + self.digest

    @classmethod
    def restore(cls, snap: Snapshot) -> StateMachine:
        if snap.is_empty:
            return cls()
        index, payloads = _SM_HEADER.unpack_from(snap.data)
        start = _SM_HEADER.size
        return cls(index, bytes(snap.data[start : start + len(_ZERO_DIGEST)]), payloads)


class SimNode:
    """One member id of the simulated cluster, across its crashes: its RawNode (None while
    down), disk and state machine, and what the checker last saw of it."""

    __slots__ = (
        "id",
        "raw",
        "disk",
        "sm",
        "incarnation",
        "seen_commit",
        "seen_role",
        "seen_term",
        "led_from",
        "crash_stage",
        "restart_at",
    )

    def __init__(self, node_id: int) -> None:
        self.id = node_id
        self.raw: RawNode | None = None  # None: down (or never started)
        self.disk: Disk | None = None  # None: never started
        self.sm = StateMachine()
        self.incarnation = 0
        self.seen_commit = 0
        self.seen_role = Role.FOLLOWER
        self.seen_term = 0
        self.led_from = (0, 0)  # (index, term) of its last entry when it took office
        self.crash_stage = -1  # >= 0: crash at that stage of the next Ready
        self.restart_at = -1

