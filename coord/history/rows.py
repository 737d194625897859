"""A raft entry's command, result and effects, as history rows (plain dicts).

The effects are what the state machine itself reported while applying the entry (its
ownership, session and KV events), so a row says what coord did, not what a reader
infers it should have done.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from coord.history.schema import DAY_MS, date_of
from coord.raft.confchange import decode_conf_change
from coord.sm import commands as c
from coord.sm.auth import PERM_NAMES, AuthEvent
from coord.sm.records import OwnershipEvent, SessionEvent, WatchEvent

Row = dict[str, Any]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


KIND_OF: dict[type, str] = {cls: _snake(cls.__name__) for cls in c.Command.__args__}


def key_text(key: bytes) -> str:
    return key.decode("utf-8", "backslashreplace")


def value_hash(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=8).hexdigest()


def add_command_fields(f: Row, cmd: Any, result: Any) -> None:
    """Add to the row `f` the columns a command and its result fill (beyond the entry's
    own; filled in place: a dict of them merged in was a dict and a merge per entry).
    Never a password, its hash or a token's digest."""
    f["request_id"] = getattr(cmd, "request_id", "") or None
    f["actor"] = getattr(cmd, "actor", "") or None
    t = type(cmd)
    if t in AUTH_COMMANDS:
        f.update(auth_fields(cmd))
        return
    if t is c.Put:
        f.update(key=key_text(cmd.key), value_len=len(cmd.value), value_hash=value_hash(cmd.value),
                 session=cmd.session_id or None)
    elif t is c.DeleteRange:
        f.update(key=key_text(cmd.key), size=getattr(result, "deleted", None))
    elif t is c.Txn:
        f.update(size=len(cmd.compares) + len(cmd.success) + len(cmd.failure))
    elif t is c.OpenSession:
        f.update(session=getattr(result, "session_id", 0) or cmd.session_id or None,
                 ttl_ms=cmd.ttl_ms, member=cmd.name or None)
    elif t is c.CloseSession:
        f.update(session=cmd.session_id)
    elif t is c.ExpireSessions:
        f.update(size=len(cmd.session_ids),
                 session=cmd.session_ids[0] if len(cmd.session_ids) == 1 else None)
    elif t is c.Own:
        f.update(session=cmd.session_id, group=cmd.group, size=len(cmd.claims))
        if len(cmd.claims) == 1:
            f["resource"] = cmd.claims[0][0]
            grants = getattr(result, "grants", ())
            f["generation"] = grants[0][1] if grants else cmd.claims[0][1]
    elif t is c.Release:
        f.update(session=cmd.session_id, group=cmd.group, size=len(cmd.resources))
        if len(cmd.resources) == 1:
            f["resource"] = cmd.resources[0]
    elif t is c.AllocatePidBlock:
        f.update(pid=getattr(result, "start", 0) or None, size=cmd.size, member=cmd.requester)
    elif t is c.LeasePid:  # size 1: a pid issued; 0: a lookup of a live lease
        f.update(topic=cmd.topic, partition=cmd.partition, size=1 if cmd.pid == -1 else 0,
                 pid=getattr(result, "pid", 0) or (cmd.pid if cmd.pid > 0 else None),
                 epoch=getattr(result, "generation", None),
                 sequence=getattr(result, "sequence_number", None),
                 expire_ms=getattr(result, "expire_ms", 0) or None)
    elif t in (c.InitProducer, c.CheckProducer):  # size 1: init issued a new pid
        f.update(topic=cmd.producer_key, pid=getattr(result, "pid", 0) or None,
                 epoch=getattr(result, "generation", None),
                 size=int(t is c.InitProducer and getattr(result, "generation", None) == 0))
        if t is c.CheckProducer:
            f.update(pid=cmd.pid, epoch=cmd.generation)
    elif t is c.Compact:
        f.update(size=cmd.revision)
    elif t is c.SetPidCapacity:
        f.update(size=cmd.capacity)
    elif t is c.NoteLeader:
        f.update(member=cmd.member)
    elif t is c.NoteQuorumLost:
        f.update(member=cmd.member, mode=cmd.mode, since_ms=cmd.since_ms, until_ms=cmd.until_ms)


def conf_change_fields(data: bytes) -> Row:
    """What a membership change entry says: the change (`mode`: add_voter, add_learner or
    remove_node), the member's name and who asked (`actor`, while auth was on). Nothing
    from an entry that does not decode."""
    try:
        change = decode_conf_change(data)
        context = json.loads(change.context) if change.context else {}
    except ValueError:
        return {}
    named = context if isinstance(context, dict) else {}
    text = {k: v for k, v in named.items() if isinstance(v, str) and v}
    return {"mode": change.type.name.lower(), "member": text.get("name"),
            "actor": text.get("actor")}


AUTH_COMMANDS = frozenset(c.AuthCommand.__args__)


def auth_fields(cmd: Any) -> Row:
    """What an auth change was about: its user, role, permission."""
    f: Row = {"user": getattr(cmd, "user", None), "role": getattr(cmd, "role", None)}
    if type(cmd) in (c.RoleGrantPermission, c.RoleRevokePermission):
        f.update(key=key_text(cmd.key), range_end=key_text(cmd.range_end) or None)
    if type(cmd) is c.RoleGrantPermission:
        f["perm"] = PERM_NAMES.get(cmd.perm_type, str(cmd.perm_type))
    return f


_KV_KINDS = {"PUT": "kv.put", "DELETE": "kv.delete"}


def effect_row(base: Row, seq: int, event: Any) -> Row:
    """The row of an entry's `seq`th effect: the entry's columns (`base`), the effect's,
    and the revision it happened at. A KV change, the effect most rows are, is made in
    one go."""
    if type(event) is WatchEvent:
        kv = event.kv
        value = kv.value
        return {**base, "revision": event.revision, "seq": seq, "ok": True,
                "kind": _KV_KINDS.get(event.type) or "kv." + event.type.lower(),
                "key": key_text(kv.key), "value_len": len(value),
                "value_hash": value_hash(value), "session": kv.session_id or None}
    return {**base, "seq": seq, "ok": True, **effect_fields(event), "revision": event.revision}


def effect_fields(event: Any) -> Row:
    """The columns an ownership or session effect fills."""
    t = type(event)
    if t is OwnershipEvent:
        return {"kind": "owner." + event.kind, "group": event.group, "resource": event.resource,
                "owner": event.owner, "generation": event.generation,
                "session": event.owner or None}
    if t is SessionEvent:
        f: Row = {"kind": "session." + event.type, "session": event.session_id}
        if event.group:
            f.update(group=event.group, resource=event.resource, generation=event.generation,
                     owner=event.new_owner, size=len(event.claims))
        return f
    raise TypeError(f"unknown event {t.__name__}")


class RowMaker:
    """Rows for entries in log order; remembers who led each term (from note_leader)."""

    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}
        # the day of the last entry and its date: entries in log order are mostly of one
        # day, so a row's date is a comparison, not a call to date_of's cache
        self._day: int | None = None
        self._date = ""

    def rows(self, index: int, term: int, time_ms: int, revision: int, kind: str, cmd: Any,
             result: Any, events: list[Any]) -> list[Row]:
        """`revision`: after the entry (for a no-op or membership change, the current one)."""
        if type(cmd) is c.NoteLeader and result is not None and not result.error:
            self.leaders[cmd.term or term] = cmd.member
        if time_ms // DAY_MS != self._day:
            self._day, self._date = time_ms // DAY_MS, date_of(time_ms)
        base: Row = {"index": index, "term": term, "time_ms": time_ms,
                     "leader": self.leaders[term] if term in self.leaders else None,
                     "date": self._date, "revision": revision}
        head = {**base, "seq": 0, "kind": kind, "ok": result is None or not result.error,
                "error": (result.error or None) if result is not None else None}
        if cmd is not None:
            add_command_fields(head, cmd, result)
        if not events:
            return [head]
        rows, seq = [head], 0
        for event in events:
            # a token issued or ended is member-local bookkeeping, not an effect for the history
            if type(event) is not AuthEvent:
                seq += 1
                rows.append(effect_row(base, seq, event))
        return rows
