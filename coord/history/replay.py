"""Replaying raft entries through the real state machine, to learn what each one did.

The raft log holds commands, not their outcomes: the revision a command landed at, the
error it got and the sessions it severed exist only once it is applied. So the history
is made by applying the retained entries, in order, to a `CoordMachine` restored from
the member's snapshot — the same apply code every member runs.

The entry and snapshot formats are the member's log's (`coord.server.storage.log_format`):
a NORMAL entry's data is the leader's clock and an encoded command
(`coord.sm.commands.encode_command`), a CONF_CHANGE entry (type 1) carries a membership
change, not a command, and a snapshot's data holds the state machine's snapshot
(`CoordMachine.snapshot`) after the members.
"""

from __future__ import annotations

import struct
from typing import Any

from coord.history.rows import KIND_OF, Row, RowMaker, conf_change_fields
from coord.history.schema import date_of
from coord.server.snapshot_file import SnapshotFile
from coord.server.storage.log_format import split_entry_data, split_snapshot
from coord.sm import CoordMachine
from coord.sm import commands as c

NORMAL, CONF_CHANGE = 0, 1


MAX_HELD_ROWS = 100_000
"""At most this many rows wait for their term's leader note (a leader that lost its term
before its note committed never names itself: its rows go out with leader None)."""


class Replayer:
    """A state machine and a row maker, fed entries in log order from a starting point."""

    def __init__(self, machine: CoordMachine | None = None) -> None:
        self.machine = machine or CoordMachine()
        self.maker = RowMaker()
        self.last_index = 0
        # Rows of a log's first entries (membership, the first leader's no-op), which come
        # before any leader clock reading: they take the first time that follows.
        self._untimed: list[Row] = []
        # Rows of a term whose leader has not named itself yet (its NoteLeader is proposed
        # at election, but a client's write can commit before it): held until the note
        # fills them in, or a later term begins without one (then the leader stays None).
        self._unled: list[Row] = []

    def restore(self, index: int, member_snapshot: SnapshotFile) -> None:
        """Start after the snapshot at `index` (a member's snapshot file)."""
        _, sm = split_snapshot(member_snapshot)
        self.machine.restore(sm)
        self.machine.drain_events()
        self.last_index = index
        term, member = self.machine.leader_note
        if member:
            self.maker.leaders[term] = member

    def apply(self, index: int, term: int, entry_type: int, data: bytes) -> tuple[list[Row], Any]:
        """The rows for one entry, and the decoded result (None for no-ops and membership
        changes). Entries must come in order with no gap (ValueError otherwise)."""
        self._follow(index)
        m = self.machine
        if entry_type == CONF_CHANGE or not data:
            kind = "conf_change" if entry_type == CONF_CHANGE else "noop"
            rows = self.maker.rows(index, term, m.clock_ms, m.revision, kind, None, None, [])
            if entry_type == CONF_CHANGE:
                rows[0].update(conf_change_fields(data))
            if not m.clock_ms:
                self._untimed += rows
                return [], None
            return self._led(rows, term), None
        try:
            time_ms, payload = split_entry_data(data)
        except struct.error:
            raise ValueError(f"entry {index} is too short for its time prefix") from None
        try:
            cmd: Any = c.decode_command(payload)
        except ValueError:
            cmd = None
        if cmd is None:
            answer = m.apply(index, term, time_ms, payload)
            return self._made(index, term, time_ms, "undecodable", None, answer.value)
        return self._command(index, term, time_ms, cmd)

    def apply_decoded(self, index: int, term: int, time_ms: int,
                      cmd: c.Command) -> tuple[list[Row], Any]:
        """`apply` of a NORMAL entry whose command is already decoded (the synthesizer's:
        it holds the command it proposes, and an encode for the log and a decode back
        were a fifth of its cost): the same rows as `apply` of its encoded entry."""
        self._follow(index)
        return self._command(index, term, time_ms, cmd)

    def _follow(self, index: int) -> None:
        if self.last_index and index != self.last_index + 1:
            raise ValueError(f"entry {index} does not follow entry {self.last_index}")
        self.last_index = index

    def _command(self, index: int, term: int, time_ms: int, cmd: Any) -> tuple[list[Row], Any]:
        # decoded once: apply_command is what apply runs after decoding
        answer = self.machine.apply_command(cmd, time_ms, term=term)
        return self._made(index, term, time_ms, KIND_OF[type(cmd)], cmd, answer.value)

    def _made(self, index: int, term: int, time_ms: int, kind: str, cmd: Any,
              result: Any) -> tuple[list[Row], Any]:
        rows = self.maker.rows(index, term, time_ms, result.revision, kind, cmd, result,
                               self.machine.drain_events())
        if self._untimed:
            rows = self._timed(time_ms) + rows
        return self._led(rows, term), result

    def flush(self) -> list[Row]:
        """At the end of the log: every row still held (with no time yet: time 0; with no
        leader note yet: leader None)."""
        rows, self._unled = self._unled + self._timed(0), []
        return rows

    def _timed(self, time_ms: int) -> list[Row]:
        """Rows still waiting for a time, given the first that follows."""
        rows, self._untimed = self._untimed, []
        for row in rows:
            row["time_ms"], row["date"] = time_ms, date_of(time_ms)
        return rows

    def _led(self, rows: list[Row], term: int) -> list[Row]:
        """Rows to hand out now, in log order, each with its term's leader if known. Rows
        of the current term wait while its leader has not named itself; a later term
        releases them (leader None: that term's leader never named itself)."""
        leaders = self.maker.leaders
        out: list[Row] = []
        if self._unled and (self._unled[0]["term"] != term or term in leaders
                            or len(self._unled) >= MAX_HELD_ROWS):
            out, self._unled = self._unled, []
        for row in rows:
            if row["leader"] is None and row["term"] in leaders:
                row["leader"] = leaders[row["term"]]
        if term in leaders or not rows:
            for row in out:
                if row["leader"] is None:
                    row["leader"] = leaders.get(row["term"])
            return out + rows
        self._unled += rows
        return out
