"""`coord status`: each member's role, term, leader, indexes, quorum view and mode, and
whether its client port is TLS, as a table (with each leader's view of its followers)
or as JSON. A member answering in plaintext on an address beyond the loopback gets a
warning line: anyone who can reach it can call it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Literal

import grpc
from google.protobuf.json_format import MessageToDict
from rich.text import Text

from coord.cli.client_commands.command import (
    UsageError,
    add_endpoints_flag,
    add_tls_flags,
    endpoints_of,
    tls_of,
)
from coord.cli.tables import print_table
from coord.client.admin import AdminClient
from coord.tls.files import TLS, TLSConfigError, is_loopback

HEADER = ("ENDPOINT", "NAME", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "QUORUM", "MODE",
          "TLS")


def register(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("status", help="each member's role, term, leader, indexes, quorum view")
    add_endpoints_flag(st)
    st.add_argument("--json", action="store_true")
    st.add_argument("--timeout", type=float, default=2.0)
    add_tls_flags(st)
    st.set_defaults(func=cmd_status)


def status_row(endpoint: str, timeout: float, tls: TLS | Literal[False] = False
               ) -> dict[str, Any]:
    """One member's Admin.Status as a dict, or {"endpoint", "error"} if it did not answer.
    "tls": whether it answered over TLS (a TLS port refuses plaintext and the other way
    round, so that is whether its client port is TLS)."""
    try:
        with AdminClient(endpoint, timeout=timeout, tls=tls) as c:
            st = c.status()
    except grpc.RpcError as e:
        return {"endpoint": endpoint, "error": f"{e.code().name}: {e.details()}"}
    row = MessageToDict(
        st, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    row["endpoint"] = endpoint
    row["tls"] = bool(tls)
    row["state_machine"] = json.loads(st.state_machine or "{}")
    return row


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One row per member (an unreachable one says why)."""
    out: list[tuple[Any, ...]] = []
    for r in rows:
        if "error" in r:
            out.append((r["endpoint"], "-", Text("unreachable", style="bold red"), "-", "-",
                        "-", "-", Text(r["error"], style="red"), "-", "-"))
            continue
        quorum = Text("yes", style="green") if r["has_quorum"] else Text(
            f"NO ({int(r['quorum_lost_ms']) / 1000:.1f}s)", style="bold red")
        mode = r.get("mode") or "-"
        if r.get("local_sessions"):
            mode += f", {r['local_sessions']} local session(s)"
        out.append((r["endpoint"], r["name"],
                    Text(r["role"], style="bold green" if r["role"] == "leader" else ""),
                    r["term"], r["leader_name"] or "-", r["commit_index"], r["applied_index"],
                    quorum, Text(mode, style="" if mode in ("read-write", "-") else "bold red"),
                    Text("yes", style="green") if r["tls"] else Text(
                        "no", style="" if is_loopback(r["endpoint"]) else "bold red")))
    return out


def plaintext_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A warning per member serving clients in plaintext beyond the loopback."""
    return [f"WARNING: {r['name']} serves clients on {r['endpoint']} without TLS: anyone"
            " who reaches it can call it (coord serve --cert-file/--key-file, and"
            " --client-cert-auth to refuse clients without a certificate)"
            for r in rows if "error" not in r and not r["tls"]
            and not is_loopback(r["endpoint"])]


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
    try:
        endpoints = endpoints_of(args)
        tls = tls_of(args)
        rows = [status_row(e, args.timeout, tls) for e in endpoints]
    except (UsageError, TLSConfigError) as e:
        print(f"coord: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(HEADER, table_rows(rows))
        for line in plaintext_lines(rows) + alarm_lines(rows) + progress_lines(rows):
            print(line)
    return 0 if all("error" not in r for r in rows) else 1
