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
        # whether a NOSPACE alarm is up: asked before every command, so kept as the
        # alarms change rather than worked out per command
        self.no_space = False

    def _changed(self) -> None:
        self.no_space = any(kind == NOSPACE for _, kind in self._active)

    def active(self) -> list[tuple[int, str]]:
        return sorted(self._active)

    def has(self, member_id: int, kind: str) -> bool:
        return (member_id, kind) in self._active

    @operation(AlarmResult)
    def change(self, action: str, member_id: int, kind: str) -> AlarmResult:
        """Raise or lower the alarm of one member, as etcd 3.4's alarm store: member 0 is
        a member id like any other (etcd's clients raise and lower alarms of member 0;
        `etcdctl alarm disarm` lowers every alarm by listing them and lowering each).
        Doing what is already done changes nothing and is not an error (every member
        that sees the quota may ask). The result names the alarm as etcd answers: the
        one raised (new or not), or the one lowered (none if it was not up)."""
        if action not in (ACTIVATE, DEACTIVATE):
            raise CommandError(INVALID_ARGUMENT, f"alarm action must be {ACTIVATE} or "
                               f"{DEACTIVATE}, got {action!r:.40}")
        if kind not in KINDS:
            raise CommandError(INVALID_ARGUMENT, f"unknown alarm {kind!r:.40}; known: "
                               f"{sorted(KINDS)}")
        if type(member_id) is not int or member_id < 0:
            raise CommandError(INVALID_ARGUMENT, "member id must be an int >= 0")
        alarm = (member_id, kind)
        was_up = alarm in self._active
        if action == ACTIVATE:
            self._active.add(alarm)
        else:
            self._active.discard(alarm)
        self._changed()
        if was_up != (action == ACTIVATE):
            self.ledger.mark()  # a change of state, not of the revision (as etcd's)
        named = action == ACTIVATE or was_up
        return AlarmResult(revision=self.ledger.revision,
                           alarms=(f"{member_id}:{kind}",) if named else ())

    def to_state(self) -> list:
        return [[m, k] for m, k in self.active()]

    def load_state(self, rows: Any) -> None:
        active = set()
        for row in rows:
            if not isinstance(row, list) or len(row) != 2:
                raise ValueError("bad alarm record")
            member_id, kind = row
            if type(member_id) is not int or member_id < 0 or kind not in KINDS:
                raise ValueError("bad alarm record")
            active.add((member_id, kind))
        self._active = active
        self._changed()
