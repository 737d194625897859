"""The audit's checkers: each takes the history DataFrame and returns its violations.

A violation row: `check` (its name), `index` and `revision` (where it shows), `subject`
(what it is about: a resource, a pid, a session...), `detail` (what went wrong, in
words), `evidence` (the rows that show it, as `index:seq kind ...` strings). Every
checker has a test that plants its violation in a real history and sees it caught.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coord.audit.checks import log, ownership, pids, sessions, sink

Checker = Callable[[Any], Any]

CHECKS: dict[str, Checker] = {
    "revisions.monotone": log.revisions_monotone,
    "log.gap_free": log.gap_free,
    "ownership.single_owner": ownership.single_owner,
    "ownership.owner_alive": ownership.owner_alive,
    "ownership.generations": ownership.generations,
    "ownership.fencing_tokens": ownership.fencing_tokens,
    "pids.disjoint": pids.disjoint,
    "pids.lease_unique": pids.lease_unique,
    "producers.epochs": pids.producer_epochs,
    "producers.fencing": pids.producer_fencing,
    "sessions.no_expiry_without_quorum": sessions.no_expiry_without_quorum,
    "sessions.ttl_respected": sessions.ttl_respected,
}

SINK_CHECKS: dict[str, Checker] = {
    "sink.no_fenced_writes": sink.no_fenced_writes,
    "sink.sequences": sink.sequences,
    "sink.publish_holder": sink.publish_holder,
}
"""The checks of a fenced sink's exported log of accepted writes (`--sink-log`): each
takes the log's DataFrame, not the history."""
