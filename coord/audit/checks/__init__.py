"""The audit's checkers: each takes the history DataFrame and returns its violations.

A violation row: `check` (its name), `index` and `revision` (where it shows), `subject`
(what it is about: a resource, a pid, a session...), `detail` (what went wrong, in
words), `evidence` (the rows that show it, as `index:seq kind ...` strings). Every
checker has a test that plants its violation in a real history and sees it caught.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coord.audit.checks import log, ownership, pids, sessions, sink, sink_coord, sink_run

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

SinkChecker = Callable[[Any, Any, Any, Any], Any]
"""A sink check: (the log, its tokens as coord's history shows them, the history, the
sink's refused writes)."""


def _own_order(check: Checker) -> SinkChecker:
    """A check of the sink's own order: it reads the log only."""
    return lambda log, _tokens, _history, _refusals: check(log)


def _by_tokens(check: Callable[[Any, Any], Any]) -> SinkChecker:
    """A check of the log against coord's grants of its tokens (`sink_coord.tokens`)."""
    return lambda log, tokens, _history, _refusals: check(log, tokens)


def _by_history(check: Callable[[Any, Any], Any]) -> SinkChecker:
    """A check of the log against other rows of coord's history than its tokens'."""
    return lambda log, _tokens, history, _refusals: check(log, history)


def _by_refusals(check: Callable[[Any, Any], Any]) -> SinkChecker:
    """A check of the sink's refused writes against coord's history."""
    return lambda _log, _tokens, history, refusals: check(refusals, history)


SINK_CHECKS: dict[str, SinkChecker] = {
    "sink.no_fenced_writes": _own_order(sink.no_fenced_writes),
    "sink.sequences": _own_order(sink.sequences),
    "sink.publish_holder": _own_order(sink.publish_holder),
    "sink.tokens_granted": _by_tokens(sink_coord.tokens_granted),
    "sink.coord_fenced_writes": _by_tokens(sink_coord.coord_fenced_writes),
    "sink.coord_publish_holder": _by_tokens(sink_coord.coord_publish_holder),
    "sink.publish_run_newest": _by_history(sink_run.publish_run_newest),
    "sink.refusal_holder_granted": _by_refusals(sink_coord.refusal_holder_granted),
}
"""The checks of a fenced sink's exported log of accepted writes and its refusals
(`--sink-log`): each takes the log's DataFrame, its tokens as coord's history shows them
(`sink_coord.tokens`), the history and the refusals' DataFrame (`SinkChecker`)."""
