"""`coord status`: each member's role, term, leader, indexes, quorum view and mode, as a
table (with each leader's view of its followers) or as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from rich.text import Text

from coord.cli.tables import print_table
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


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One row per member (an unreachable one says why)."""
    out: list[tuple[Any, ...]] = []
    for r in rows:
        if "error" in r:
            out.append((r["endpoint"], "-", Text("unreachable", style="bold red"), "-", "-",
                        "-", "-", Text(r["error"], style="red"), "-"))
            continue
        quorum = Text("yes", style="green") if r["has_quorum"] else Text(
            f"NO ({int(r['quorum_lost_ms']) / 1000:.1f}s)", style="bold red")
        mode = r.get("mode") or "-"
        if r.get("local_sessions"):
            mode += f", {r['local_sessions']} local session(s)"
        out.append((r["endpoint"], r["name"],
                    Text(r["role"], style="bold green" if r["role"] == "leader" else ""),
                    r["term"], r["leader_name"] or "-", r["commit_index"], r["applied_index"],
                    quorum, Text(mode, style="" if mode in ("read-write", "-") else "bold red")))
    return out


def progress_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each leader's view of its followers, one line each."""
    lines = []
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
        print_table(HEADER, table_rows(rows))
        for line in alarm_lines(rows) + progress_lines(rows):
            print(line)
    return 0 if all("error" not in r for r in rows) else 1
