"""Input bounds, shared by validation everywhere so a command is judged the same way
by every member (and by a client that wants to check before proposing)."""

from __future__ import annotations

MAX_KEY_BYTES = 1536  # 1.5 KiB: KV keys, and names (group, resource, topic, producer key)
MAX_VALUE_BYTES = 1 << 20  # 1 MiB
MAX_NAME_BYTES = MAX_KEY_BYTES
MAX_REQUEST_ID_BYTES = 256
DEFAULT_MAX_TXN_OPS = 128  # etcd's default --max-txn-ops, per branch and for the compares
MAX_TXN_OPS = 1024
"""The most a txn may hold at any level in apply, on every member alike: a member's
--max-txn-ops (checked before proposing) may be set up to this, never past it."""
MAX_CLAIMS = 100_000  # resources in one own/release
MAX_CLAIM_GENERATION = 1 << 53  # requested generations stay exact in any JSON reader
MIN_TTL_MS = 1_000
MAX_TTL_MS = 3_600_000
MAX_PID_BLOCK = 100_000
MAX_PID_GENERATION = (1 << 31) - 1  # producer generations fit a signed 32-bit field
MAX_PARTITION = (1 << 31) - 1
MAX_PID_CAPACITY = 1 << 22  # live pid leases a cluster may be set to hold (its ring: 32 MiB)
MAX_EXPIRE_IDS = 100_000
MAX_SESSIONS = 1_000_000  # live sessions (etcd leases) in the whole cluster
MAX_OWNED_PER_SESSION = 1_000_000  # resources one session may own, all groups together
INT64_MIN = -(1 << 63)  # an int field of a record: int64, in JSON and packed alike
INT64_MAX = (1 << 63) - 1
MAX_JSON_DEPTH = 300
"""Nesting of a command written as JSON (a txn 128 levels deep is 258): deeper is refused
before it is decoded into records, which recurses once per level, so no command can make
apply exceed Python's recursion limit (whose exact edge depends on the caller's stack and
would differ between members)."""


def utf8_len(text: str) -> int:
    """Length in UTF-8 bytes; lone surrogates count as 3 (they are escaped on the wire)."""
    return len(text.encode("utf-8", "surrogatepass"))
