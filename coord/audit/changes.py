"""The audit trail a history holds, read back for `coord audit`: every auth change
(users, roles, permissions, auth switched on or off) and administrative change
(compaction, the PID capacity, alarms, membership) the cluster committed, with who made
it (`actor`: none for a change made while auth was off, or without a user) and when,
and the logins per user. Counted in Spark; only the first `LISTED` changes come back to
the driver."""

from __future__ import annotations

from typing import Any

from coord.history.schema import ADMIN_CHANGE_KINDS, AUTH_CHANGE_KINDS

LISTED = 200
COLUMNS = ("index", "time_ms", "kind", "ok", "error", "actor", "user", "role", "perm", "key",
           "range_end", "size", "mode", "member")
"""What a listed change shows: the entry, who, and what it was about (`size`: the
compaction's revision, the PID capacity; `mode` and `member`: a membership change's)."""
NO_ACTOR = "(none)"


def changes(df: Any) -> dict[str, Any]:
    """The auth and admin changes of history `df`: their count, by kind and by actor,
    the first LISTED in log order, and how many logins each user made."""
    from pyspark.sql import functions as F

    commands = df.filter(F.col("seq") == 0)
    found = commands.filter(F.col("kind").isin(*AUTH_CHANGE_KINDS, *ADMIN_CHANGE_KINDS))
    counts = (found.groupBy("kind", F.coalesce(F.col("actor"), F.lit(NO_ACTOR)).alias("by"))
              .count().collect())
    by_kind: dict[str, int] = {}
    by_actor: dict[str, int] = {}
    for r in counts:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["count"]
        by_actor[r["by"]] = by_actor.get(r["by"], 0) + r["count"]
    listed = [r.asDict() for r in found.select(*COLUMNS).orderBy("index").limit(LISTED)
              .collect()]
    logins = (commands.filter((F.col("kind") == "authenticate") & F.col("ok"))
              .groupBy("user").count().collect())
    return {"count": sum(by_kind.values()), "by_kind": dict(sorted(by_kind.items())),
            "by_actor": dict(sorted(by_actor.items())), "listed": listed,
            "logins": {r["user"]: r["count"] for r in sorted(logins, key=lambda r: r["user"])}}


def counts_text(counts: dict[str, int]) -> str:
    """`name n, name n, ...`, or `none`."""
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def describe(change: dict[str, Any]) -> str:
    """One listed change in words: what, by whom, about what."""
    about = [f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"
             for name in ("user", "role", "perm", "key", "range_end", "size", "mode", "member")
             if (value := change.get(name)) is not None]
    outcome = "" if change["ok"] else f" refused ({change['error']})"
    return (f"{change['kind']} by {change['actor'] or NO_ACTOR}"
            f"{' ' + ' '.join(about) if about else ''}{outcome}")


def trail_lines(trail: dict[str, Any], shown: int = 20) -> list[str]:
    """`coord audit`'s lines about the trail: the counts, then the first `shown` changes."""
    from datetime import UTC, datetime

    lines = [f"auth and admin changes: {trail['count']} (by actor: "
             f"{counts_text(trail['by_actor'])}); logins: {counts_text(trail['logins'])}"]
    for c in trail["listed"][:shown]:
        when = datetime.fromtimestamp(c["time_ms"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"  index {c['index']} at {when}: {describe(c)}")
    if trail["count"] > shown:
        lines.append(f"  ... {trail['count'] - shown} more (--report or --json lists "
                     f"the first {LISTED})")
    return lines
