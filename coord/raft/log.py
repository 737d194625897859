"""The replicated log as one member sees it: a snapshot, the entries after it, and the
marks that say how far they are durable (`stable`), committed and applied.

The whole uncompacted log lives in memory; the driver persists the unstable tail handed
out in each Ready and reports back with `stable_to`. Invariant:
snapshot.index <= applied <= committed, and applied <= stable <= last_index.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import CompactedError
from .types import Entry, Snapshot


class RaftLog:
    snapshot: Snapshot
    offset: int
    """The snapshot's index: the last index the log no longer holds as an entry."""

    def __init__(self, snapshot: Snapshot, entries: Sequence[Entry], committed: int) -> None:
        self._set_snapshot(snapshot)
        self.entries: list[Entry] = list(entries)
        self.stable = self.last_index()
        self.committed = max(committed, snapshot.meta.index)
        self.applied = snapshot.meta.index
        self.pending_snapshot: Snapshot | None = None
        if self.entries and self.entries[0].index != snapshot.meta.index + 1:
            raise ValueError("log entries do not follow the snapshot")

    def _set_snapshot(self, snapshot: Snapshot) -> None:
        """The log now starts after `snapshot`; `offset` is its index, kept as a field:
        every position below is counted from it, a dozen times and more per write round,
        and a property read is a Python call each time."""
        self.snapshot = snapshot
        self.offset = snapshot.meta.index

    # -- positions --------------------------------------------------------------------
    def first_index(self) -> int:
        return self.offset + 1

    def last_index(self) -> int:
        return self.offset + len(self.entries)

    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.meta.term

    def term(self, index: int) -> int | None:
        """Term of the entry at `index`; None if compacted away or beyond the log."""
        off = self.offset
        if index == off:
            return self.snapshot.meta.term
        if index < off or index > off + len(self.entries):
            return None
        return self.entries[index - off - 1].term

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Would a candidate with this last entry have a log at least as complete as ours?"""
        mine = self.last_term()
        return last_term > mine or (last_term == mine and last_index >= self.last_index())

    # -- reading ----------------------------------------------------------------------
    def slice(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [lo, hi), at least one if any, at most about max_bytes of payload."""
        if lo <= self.offset:
            raise CompactedError(f"index {lo} is compacted (first index {self.first_index()})")
        hi = min(hi, self.last_index() + 1)
        if lo >= hi:
            return []
        ents = self.entries[lo - self.offset - 1 : hi - self.offset - 1]
        if max_bytes is not None:
            size = 0
            for i, e in enumerate(ents):
                size += len(e.data) + 24
                if size > max_bytes and i > 0:
                    return ents[:i]
        return ents

    def unstable_entries(self) -> list[Entry]:
        if self.stable >= self.last_index():
            return []
        return self.entries[self.stable - self.offset :]

    def next_committed_entries(self, max_count: int) -> list[Entry]:
        """Committed, durable, not yet applied entries (none while a snapshot is pending)."""
        if self.pending_snapshot is not None:
            return []
        lo = max(self.applied + 1, self.first_index())
        hi = min(self.committed, self.stable, lo + max_count - 1)
        if hi < lo:
            return []
        return self.entries[lo - self.offset - 1 : hi - self.offset]

    def has_next_committed_entries(self) -> bool:
        if self.pending_snapshot is not None:
            return False
        return min(self.committed, self.stable) > max(self.applied, self.offset)

    # -- writing ----------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> int:
        """Append entries that follow the last one, or replace a conflicting suffix."""
        if not entries:
            return self.last_index()
        first = entries[0].index
        if first <= self.committed:
            raise AssertionError(f"append at {first} would overwrite committed {self.committed}")
        if first <= self.last_index():
            del self.entries[first - self.offset - 1 :]
            self.stable = min(self.stable, first - 1)
        elif first != self.last_index() + 1:
            raise AssertionError(f"gap: append at {first} after {self.last_index()}")
        self.entries.extend(entries)
        return self.last_index()

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry that is new or disagrees with our log; 0 if none."""
        for e in entries:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= `index` whose term is <= `term`, with its term.

        Lets a rejected leader skip a whole term of mismatching entries per round trip."""
        while index > self.offset:
            t = self.term(index)
            if t is None or t <= term:
                break
            index -= 1
        return index, self.term(index) or 0

    def maybe_append(
        self, index: int, log_term: int, committed: int, entries: Sequence[Entry]
    ) -> tuple[int, bool]:
        """A follower's handling of an append: (last new index, accepted)."""
        if not self.match_term(index, log_term):
            return 0, False
        last_new = index + len(entries)
        conflict = self.find_conflict(entries)
        if conflict:
            if conflict <= self.committed:
                raise AssertionError(f"conflict at {conflict} below commit {self.committed}")
            self.append(entries[conflict - index - 1 :])
        self.commit_to(min(committed, last_new))
        return last_new, True

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.last_index():
                raise AssertionError(f"commit {index} beyond last index {self.last_index()}")
            self.committed = index

    def maybe_commit(self, index: int, term: int) -> bool:
        """Commit `index` if it is newer and from `term` (a leader commits only its own
        term's entries by counting; earlier ones follow)."""
        if index > self.committed and self.term(index) == term:
            self.committed = index
            return True
        return False

    def applied_to(self, index: int) -> None:
        if index > self.committed or index < self.applied:
            raise AssertionError(f"applied {index} outside ({self.applied}, {self.committed}]")
        self.applied = index

    def stable_to(self, index: int, term: int) -> None:
        if self.term(index) == term and index > self.stable:
            self.stable = index

    # -- snapshots --------------------------------------------------------------------
    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self._set_snapshot(snapshot)
        self.entries = []
        self.committed = snapshot.meta.index
        self.stable = snapshot.meta.index
        self.pending_snapshot = snapshot

    def snapshot_applied(self, snapshot: Snapshot) -> None:
        if self.pending_snapshot is snapshot:
            self.pending_snapshot = None
            self.applied = max(self.applied, snapshot.meta.index)

    def compact(self, snapshot: Snapshot) -> None:
        """Drop entries covered by a snapshot the state machine took at an applied index."""
        index = snapshot.meta.index
        if index <= self.offset:
            return
        if index > self.applied:
            raise AssertionError(f"compact at {index} beyond applied {self.applied}")
        if self.term(index) != snapshot.meta.term:
            raise AssertionError(f"snapshot term mismatch at {index}")
        del self.entries[: index - self.offset]
        self._set_snapshot(snapshot)
