"""Planting violations in a real (synthesized) history: each plant is a few rows
appended as new entries after the history's end, shaped as the state machine would
write them except for the one promise they break. `plant_all` returns the rows and,
per check, the index where its violation sits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coord.history.schema import date_of

Row = dict[str, Any]


class Planter:
    def __init__(self, rows: list[Row]) -> None:
        self.rows = list(rows)
        last = self.rows[-1]
        self.index, self.revision, self.time_ms = last["index"], max(
            r["revision"] for r in rows), last["time_ms"]
        self.term, self.leader = last["term"], last["leader"]

    def entry(self, kind: str, *effects: Row, step: int = 1, revision_step: int = 1,
              at_ms: int | None = None, **fields: Any) -> int:
        """Append one entry: its command row and effect rows; returns its index."""
        self.index += step
        self.revision += revision_step
        self.time_ms += 10
        t = self.time_ms if at_ms is None else at_ms
        base = {"index": self.index, "term": self.term, "leader": self.leader, "time_ms": t,
                "date": date_of(t), "revision": self.revision, "ok": True}
        self.rows.append({**base, "seq": 0, "kind": kind, **fields})
        for seq, effect in enumerate(effects, 1):
            self.rows.append({**base, "seq": seq, **effect})
        return self.index


def _last(rows: list[Row], kind: str) -> Iterator[Row]:
    return (r for r in reversed(rows) if r["kind"] == kind)


def plant_all(rows: list[Row]) -> tuple[list[Row], dict[str, int]]:
    p = Planter(rows)
    at: dict[str, int] = {}
    ended = {r["session"] for r in rows if r["kind"].startswith("session.")}
    opened = [r for r in rows if r["kind"] == "open_session" and r["ok"]]
    live = [r["session"] for r in opened if r["session"] not in ended]
    owners: dict[tuple[str, str], Row] = {}
    for r in rows:
        if r["kind"].startswith("owner."):
            owners[(r["group"], r["resource"])] = r
    held = next(r for r in owners.values() if r["owner"] and r["owner"] != live[-1])

    # a second owner: granted to a live session with no sever of the holder
    res = {"group": held["group"], "resource": held["resource"]}
    grant = {"kind": "owner.grant", **res, "owner": live[-1], "session": live[-1],
             "generation": held["generation"] + 1}
    at["ownership.single_owner"] = p.entry("own", grant, session=live[-1], **res)
    # a grant to a session that had ended
    dead = next(r["session"] for r in _last(rows, "session.expired"))
    res = {"group": "planted", "resource": "dead"}
    at["ownership.owner_alive"] = p.entry("own", {"kind": "owner.grant", **res, "owner": dead,
                                                  "session": dead, "generation": 1},
                                          session=dead, **res)
    # a generation granted twice (freed at 1, then granted at 1 again)
    res = {"group": "planted", "resource": "gen"}
    p.entry("own", {"kind": "owner.grant", **res, "owner": live[0], "session": live[0],
                    "generation": 1}, session=live[0], **res)
    p.entry("release", {"kind": "owner.release", **res, "owner": 0, "generation": 1},
            session=live[0], **res)
    at["ownership.generations"] = p.entry(
        "own", {"kind": "owner.grant", **res, "owner": live[0], "session": live[0],
                "generation": 1}, session=live[0], **res)
    # a grant whose recorded revision is not the one its command reported
    res = {"group": "planted", "resource": "token"}
    at["ownership.fencing_tokens"] = p.entry(
        "own", {"kind": "owner.grant", **res, "owner": live[0], "session": live[0],
                "generation": 1, "revision": p.revision - 5}, session=live[0], **res)
    # pid 1 issued again (a reused pid)
    at["pids.disjoint"] = p.entry("allocate_pid_block", pid=1, size=10, member="planted")
    # a live lease's pid leased again
    lease = next(_last(rows, "lease_pid"))
    at["pids.lease_unique"] = p.entry("lease_pid", pid=lease["pid"], size=1, epoch=7,
                                      expire_ms=p.time_ms + 3_600_000, topic="planted",
                                      partition=0)
    # a producer's epoch that did not go up, and a fenced epoch accepted
    bumped = next(r for r in _last(rows, "init_producer") if r["ok"] and r["epoch"] >= 1)
    prod = {"topic": bumped["topic"], "pid": bumped["pid"]}
    at["producers.epochs"] = p.entry("init_producer", epoch=bumped["epoch"], size=0, **prod)
    at["producers.fencing"] = p.entry("check_producer", epoch=bumped["epoch"] - 1, **prod)
    # an expiry while a member had no quorum (the note comes after the period it records)
    oldest = opened[0]
    lost_from = p.time_ms + 20
    expired = p.entry("expire_sessions", {"kind": "session.expired",
                                          "session": oldest["session"]},
                      revision_step=0, at_ms=lost_from + 30, session=oldest["session"], size=1)
    p.entry("note_quorum_lost", revision_step=0, member="n2", mode="read-only",
            since_ms=lost_from, until_ms=lost_from + 60, at_ms=lost_from + 100)
    at["sessions.no_expiry_without_quorum"] = expired
    # an expiry before the session's TTL ran even once
    sid = max(r["session"] for r in opened) + 1000
    p.entry("open_session", revision_step=0, session=sid, ttl_ms=5_000)
    at["sessions.ttl_respected"] = p.entry(
        "expire_sessions", {"kind": "session.expired", "session": sid}, session=sid, size=1)
    # a revision that jumps, and then a hole in the log
    at["revisions.monotone"] = p.entry("barrier", revision_step=3)
    p.entry("barrier", revision_step=0)
    at["log.gap_free"] = p.index + 1
    p.entry("barrier", step=2, revision_step=0)
    return p.rows, at
