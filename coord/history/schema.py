"""The history row schema, versioned: one row per applied command plus one per effect.

A raft entry becomes row `seq` 0 (the command: its kind, fields, result) and rows 1.. for
what it did (ownership changes, session ends, KV changes), all at the entry's `index`,
`term`, leader-assigned `time_ms` and the `revision` after apply, so (index, seq) is a
row's identity. Bump SCHEMA_VERSION when a column changes meaning or goes away; adding a
nullable column is backward compatible (readers ask for the columns they know).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

SCHEMA_VERSION = 1

# (name, arrow type name, meaning). Every column but the identity ones is nullable.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("revision", "int64", "the cluster revision after the entry was applied"),
    ("index", "int64", "raft log index of the entry"),
    ("seq", "int32", "0: the command itself; 1..: its effects, in the order they happened"),
    ("term", "int64", "raft term of the entry"),
    ("leader", "string", "member that led the term (from its note_leader entry), if known"),
    ("time_ms", "int64", "the leader's clock at proposal (Unix ms); never a follower's"),
    ("kind", "string", "what the row is: a command (own, put, ...) or an effect "
     "(owner.grant, session.expired, kv.put, ...); see KINDS"),
    ("ok", "bool", "the command succeeded (effects: always true)"),
    ("error", "string", "the result's error reason (OWNED_BY_HIGHER_GENERATION, ...)"),
    ("request_id", "string", "the client's request id, for retried writes"),
    ("session", "int64", "session: the requester, or the session an effect is about"),
    ("group", "string", "ownership group"),
    ("resource", "string", "ownership resource (one-claim commands and owner.* effects)"),
    ("generation", "int64", "ownership generation (fencing token with revision)"),
    ("owner", "int64", "owner.*: the owner after the change (0: freed); severs: new owner"),
    ("pid", "int64", "producer id: a lease's pid, a block's start, a producer's pid"),
    ("size", "int64", "pids issued (block size; 1 for a new lease or producer pid, 0 for "
     "a lookup or a bump); count of claims / ids / keys for multi-item commands; "
     "set_pid_capacity: the capacity"),
    ("epoch", "int64", "producer epoch (init_producer generation) or a lease's generation"),
    ("sequence", "int64", "producer sequence number (lease_pid: the starting one)"),
    ("expire_ms", "int64", "pid lease expiry (leader clock)"),
    ("topic", "string", "pid lease topic, or producer key for init_producer"),
    ("partition", "int32", "pid lease partition"),
    ("key", "string", "KV key (UTF-8, undecodable bytes backslash-escaped)"),
    ("value_len", "int64", "KV value length in bytes"),
    ("value_hash", "string", "KV value: blake2b-64 hex"),
    ("ttl_ms", "int64", "session TTL"),
    ("member", "string", "note_leader / note_quorum_lost: the member; conf_change: the "
     "member added or removed"),
    ("mode", "string", "note_quorum_lost: read-only or no-quorum; conf_change: add_voter, "
     "add_learner or remove_node"),
    ("since_ms", "int64", "note_quorum_lost: start of the period (the member's clock)"),
    ("until_ms", "int64", "note_quorum_lost: end of the period"),
    ("actor", "string", "the user a write, an auth change or a membership change was made "
     "as, through either API (none: auth off, or no user)"),
    ("user", "string", "auth changes: the user changed; authenticate: who logged in"),
    ("role", "string", "auth changes: the role changed or granted"),
    ("perm", "string", "role_grant_permission: READ, WRITE or READWRITE (another number as "
     "is); the permission's key is in `key`"),
    ("range_end", "string", "role_grant/revoke_permission: the permission's range end "
     "(text as `key`; a lone NUL: every key from `key` on)"),
    ("date", "string", "UTC date of time_ms, YYYY-MM-DD (a Parquet partition column)"),
)
PARTITION_COLUMNS = ("date", "kind")

AUTH_CHANGE_KINDS = (
    "auth_enable", "auth_disable", "user_add", "user_delete", "user_change_password",
    "user_grant_role", "user_revoke_role", "role_add", "role_delete",
    "role_grant_permission", "role_revoke_permission",
)
"""etcd's auth changes, made as the user in `actor` (never a password or its hash); a
login (`authenticate`) changes nothing and is not one of them."""
ADMIN_CHANGE_KINDS = ("compact", "set_pid_capacity", "alarm", "conf_change")
"""The administrative changes the log holds: compaction, the PID capacity, alarms and
membership changes (a leader transfer and a defragmentation are no entries)."""

COMMAND_KINDS = (
    "put", "range", "delete_range", "txn", "compact", "events_since", "open_session",
    "close_session", "expire_sessions", "own", "release", "get_owner", "list_owners",
    "owner_events_since", "allocate_pid_block", "lease_pid", "init_producer",
    "check_producer", "barrier", "alarm", "note_leader", "note_quorum_lost",
    "set_pid_capacity", *AUTH_CHANGE_KINDS, "authenticate",
    "noop",  # a new leader's empty entry
    "conf_change",  # a membership change entry
    "undecodable",  # an entry no command decodes from (the machine refused it)
)
EFFECT_KINDS = (
    "owner.grant", "owner.reset", "owner.release", "owner.expire", "owner.sever",
    "session.released", "session.expired", "session.severed",
    "kv.put", "kv.delete",
)
KINDS = COMMAND_KINDS + EFFECT_KINDS


def arrow_schema() -> Any:
    """The pyarrow schema (imported here so the rest of coord.history needs no pyarrow)."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(),
             "bool": pa.bool_()}
    required = {"revision", "index", "seq", "term", "time_ms", "kind", "ok", "date"}
    fields = [pa.field(name, types[t], nullable=name not in required) for name, t, _ in COLUMNS]
    return pa.schema(fields, metadata={b"coord.history.schema_version": str(SCHEMA_VERSION)})


_DATES: dict[int, str] = {}
DAY_MS = 86_400_000


def date_of(time_ms: int) -> str:
    """YYYY-MM-DD (UTC) of a Unix-ms time, cached per day (a hot path of export)."""
    day = time_ms // DAY_MS
    date = _DATES.get(day)
    if date is None:
        date = datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%d")
        _DATES[day] = date
    return date


def markdown_table() -> str:
    """The schema as the README shows it (a test keeps the two the same)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{n}` | {t} | {d} |" for n, t, d in COLUMNS]
    return "\n".join(lines)
