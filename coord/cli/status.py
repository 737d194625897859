"""`coord status`: each member's role, term, leader, indexes, quorum view and mode, as a
table (with each leader's view of its followers) or as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from coord.client.admin import AdminClient

HEADER = ("ENDPOINT", "NAME", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "QUORUM", "MODE")


def register(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("status", help="each member's role, term, leader, indexes, quorum view")
    st.add_argument("--endpoints", required=True)
    st.add_argument("--json", action="store_true")
    st.add_argument("--timeout", type=float, default=2.0)
    st.set_defaults(func=cmd_status)


def status_row(endpoint: str, timeout: float) -> dict[str, Any]:
    """One member's Admin.Status as a dict, or {"endpoint", "error"} if it did not answer."""
    try:
        with AdminClient(endpoint, timeout=timeout) as c:
            st = c.status()
    except grpc.RpcError as e:
        return {"endpoint": endpoint, "error": f"{e.code().name}: {e.details()}"}
    row = MessageToDict(
        st, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    row["endpoint"] = endpoint
    row["state_machine"] = json.loads(st.state_machine or "{}")
    return row


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The table, then one line per leader->follower progress."""
    table: list[tuple[str, ...]] = [HEADER]
    for r in rows:
        if "error" in r:
            table.append((r["endpoint"], "-", "unreachable", "-", "-", "-", "-", r["error"], "-"))
            continue
        quorum = "yes" if r["has_quorum"] else f"NO ({int(r['quorum_lost_ms']) / 1000:.1f}s)"
        table.append(
            (
                r["endpoint"],
                r["name"],
                r["role"],
                str(r["term"]),
                r["leader_name"] or "-",
                str(r["commit_index"]),
                str(r["applied_index"]),
                quorum,
                r.get("mode") or "-",
            )
        )
    widths = [max(len(str(row[i])) for row in table) for i in range(len(HEADER))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    lines += alarm_lines(rows)
    for r in rows:
        for p in r.get("progress", []):
            if p["name"] == r["name"]:
                continue
            lines.append(
                f"  {r['name']} -> {p['name']}: match {p['match_index']} next"
                f" {p['next_index']} {p['state']}{'' if p['recent_active'] else ' (inactive)'}"
            )
    return lines


def alarm_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per active alarm (they are replicated: every member reports the same)."""
    names = {m["id"]: m["name"] for r in rows for m in r.get("members", [])}
    alarms = sorted({a for r in rows for a in r.get("state_machine", {}).get("alarms", [])})
    out = []
    for alarm in alarms:
        member, _, kind = alarm.partition(":")
        out.append(f"ALARM {kind}: member {names.get(member, member)} is over its space quota;"
                   " writes that add state are refused (NO_SPACE) until space is freed")
    return out


def cmd_status(args: argparse.Namespace) -> int:
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    rows = [status_row(e, args.timeout) for e in endpoints]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for line in render(rows):
            print(line)
    return 0 if all("error" not in r for r in rows) else 1
