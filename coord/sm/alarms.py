"""Cluster alarms (etcd's): a member over its space quota raises NOSPACE through the log,
so every member refuses the same writes from the same log position on.

While any NOSPACE alarm is active, commands that add state are refused whole with
NO_SPACE before they change anything: puts, txns that put, opening sessions (etcd's
LeaseGrant), claims, producer ids. Reads, deletes, releases, closing and expiring
sessions and compaction go on — they are how space is freed. The member that raised
the alarm lowers it (another command) once its usage is back under the quota; an
operator can too (etcd's `alarm disarm`). Alarms live in the snapshot.
"""

from __future__ import annotations

from typing import Any

from coord.sm import commands as c
from coord.sm.errors import INVALID_ARGUMENT, CommandError
from coord.sm.ledger import Ledger, operation
from coord.sm.results import AlarmResult

NOSPACE = "NOSPACE"
KINDS = frozenset({NOSPACE})
ACTIVATE, DEACTIVATE = "activate", "deactivate"

# Commands refused while a NOSPACE alarm is up (a Txn only if it puts, see `adds_state`).
_ADDING = (c.Put, c.OpenSession, c.Own, c.AllocatePidBlock, c.LeasePid, c.InitProducer)


def adds_state(cmd: Any) -> bool:
    """Whether `cmd` may grow the state (the ones a NOSPACE alarm holds back)."""
    if isinstance(cmd, _ADDING):
        return not (type(cmd) is c.LeasePid and cmd.pid != -1)  # a lookup adds nothing
    if type(cmd) is c.Txn:
        return _txn_puts(cmd)
    return False


def _txn_puts(txn: c.Txn) -> bool:
    return any(type(op) is c.Put or (type(op) is c.Txn and _txn_puts(op))
               for op in (*txn.success, *txn.failure))


class AlarmTable:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._active: set[tuple[int, str]] = set()  # (member id, kind)

    @property
    def no_space(self) -> bool:
        return any(kind == NOSPACE for _, kind in self._active)

    def active(self) -> list[tuple[int, str]]:
        return sorted(self._active)

    def has(self, member_id: int, kind: str) -> bool:
        return (member_id, kind) in self._active

    @operation(AlarmResult)
    def change(self, action: str, member_id: int, kind: str) -> AlarmResult:
        """Raise or lower one alarm; lowering with member 0 lowers that kind for every
        member (etcd's disarm with no member). Doing what is already done changes
        nothing and is not an error (every member that sees the quota may ask)."""
        if action not in (ACTIVATE, DEACTIVATE):
            raise CommandError(INVALID_ARGUMENT, f"alarm action must be {ACTIVATE} or "
                               f"{DEACTIVATE}, got {action!r:.40}")
        if kind not in KINDS:
            raise CommandError(INVALID_ARGUMENT, f"unknown alarm {kind!r:.40}; known: "
                               f"{sorted(KINDS)}")
        if type(member_id) is not int or member_id < 0 or (action == ACTIVATE and not member_id):
            raise CommandError(INVALID_ARGUMENT, "member id must be a positive int (0: every"
                               " member, when lowering)")
        if action == ACTIVATE:
            changed = {(member_id, kind)} - self._active
            self._active |= changed
        else:
            changed = {a for a in self._active if a[1] == kind and member_id in (0, a[0])}
            self._active -= changed
        if changed:
            self.ledger.mark()  # a change of state, not of the revision (as etcd's)
        return AlarmResult(revision=self.ledger.revision,
                           alarms=tuple(f"{m}:{k}" for m, k in self.active()))

    def to_state(self) -> list:
        return [[m, k] for m, k in self.active()]

    def load_state(self, rows: Any) -> None:
        active = set()
        for row in rows:
            if not isinstance(row, list) or len(row) != 2:
                raise ValueError("bad alarm record")
            member_id, kind = row
            if type(member_id) is not int or member_id <= 0 or kind not in KINDS:
                raise ValueError("bad alarm record")
            active.add((member_id, kind))
        self._active = active
