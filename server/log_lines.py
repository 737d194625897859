"""A member's log lines for machines: `--log-format json` writes each record as one JSON
object with stable fields (etcd's `--logger=zap` idea), so an operator's log pipeline
keys on `event` instead of parsing prose.

The fields: `ts`, `level`, `logger`, `msg`, and `member`, `term`, `leader`, `event`,
`request_id`. A state change an operator needs names its `event` with the words the
console's event log and `coord status` use (`leader`, `quorum`, `mode`, `member`,
`snapshot`, `compaction`, `alarm`); every other line has `event: null`. `request_id` is
the id a client gave the request that caused the line (`request(...)`): the lines about a
member-local session a read-only member opened — its open, and its registration or drop
once the member rejoins a majority — are the ones a client's request causes. Every other
line has `request_id: null`, the state changes among them: an election, a mode change, a
snapshot, an auto-compaction or the quota guard's alarm is the member's own doing, and a
membership change, a Compact or an alarm disarmed through the API carries no request id
(their requests have none). `member`, `term`
and `leader` come from the record's `extra=` when the call site knows them (a leader
change logs the new leader), else from the member whose task logged it: a member binds
itself once (`bind_member`), and the asyncio tasks it starts inherit that binding, so
several in-process members each stamp their own lines. Stdlib only: the formatter is on
the member's path and must stay as light as `logging` itself."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

LEADER = "leader"
"""Elections: this member's role or the leader it follows changed (the console's word)."""
QUORUM = "quorum"
"""The member lost or regained a quorum, leader and role unchanged."""
MODE = "mode"
"""read-write -> read-only and back (`coord status`'s mode column)."""
MEMBER = "member"
"""Membership: a member was added (or promoted) or removed."""
SNAPSHOT = "snapshot"
"""This member took a snapshot and compacted its log."""
SNAPSHOT_INSTALL = "snapshot-install"
"""This member installed a snapshot the leader sent (the failpoint's name too)."""
COMPACTION = "compaction"
"""Auto-compaction compacted the key-value history."""
ALARM = "alarm"
"""An alarm (NOSPACE) was raised or cleared (`coord status`'s alarm lines)."""

EVENTS = (LEADER, QUORUM, MODE, MEMBER, SNAPSHOT, SNAPSHOT_INSTALL, COMPACTION, ALARM)
FIELDS = ("member", "term", "leader", "event", "request_id")
"""The stable fields every JSON line carries (null when unknown)."""
FORMATS = ("text", "json")

MemberFields = Callable[[], dict[str, Any]]
"""What a bound member answers when asked for its `member`, `term` and `leader`."""

_BOUND: ContextVar[MemberFields | None] = ContextVar("coord_log_member", default=None)


def bind_member(fields: MemberFields) -> None:
    """Stamp the lines logged from this context (and the tasks started from it after this
    call) with `fields()`: call it first thing in the member's own task."""
    _BOUND.set(fields)


def event(name: str, **fields: Any) -> dict[str, Any]:
    """`extra=` for a state-change line: its event name and what the call site knows
    (term=, leader=, ...)."""
    assert name in EVENTS, name
    return {"event": name, **fields}


def request(request_id: str | None) -> dict[str, Any]:
    """`extra=` for a line a client's request caused: the id the client gave it (None
    when it gave none: a member never makes one up for the log)."""
    return {"request_id": request_id or None}


class MemberFieldsFilter(logging.Filter):
    """Fills the stable fields the record's `extra=` left out, from the bound member."""

    def filter(self, record: logging.LogRecord) -> bool:
        bound = _BOUND.get()
        known = bound() if bound is not None else {}
        for field in FIELDS:
            if not hasattr(record, field):
                setattr(record, field, known.get(field))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback goes in `exc`)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in FIELDS:
            line[field] = getattr(record, field, None)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


TEXT_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-5s %(message)s"


def formatter(log_format: str) -> logging.Formatter:
    """`--log-format`'s formatter: the text lines as they always were, or JSON."""
    if log_format == "json":
        return JsonFormatter()
    return logging.Formatter(TEXT_FORMAT, datefmt="%H:%M:%S")
