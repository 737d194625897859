"""Sessions: `coord session open|keepalive|list|close`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coord.cli.client_commands.command import (
    EXIT_ERROR,
    Interrupt,
    add_command,
    client,
    command,
    inspect_read,
)
from coord.cli.client_commands.output import emit, jsonable, message_dict
from coord.cli.tables import print_table
from coord.client.errors import CoordError
from coord.client.session_state import describe_end
from coord.tui.format import duration_ms


@command
def cmd_session_open(args: argparse.Namespace) -> int:
    """Open a session and print its id; keep it alive with `coord session keepalive`."""
    with client(args) as c:
        info = c.open_session(args.name, args.ttl, args.read_only_ok)
        emit(args, info, lambda: [str(info.session_id)])
        if info.local and not args.json:
            print(f"coord: session {info.session_id} is member-local to "
                  f"{info.header.member} (read-only): keep it alive through that member; it "
                  "is registered with the cluster when that member rejoins a majority",
                  file=sys.stderr)
    return 0


@command
def cmd_session_keepalive(args: argparse.Namespace) -> int:
    """Keep a session alive until Ctrl-C (which leaves it to expire) or it ends."""
    with client(args) as c, Interrupt() as stop:
        session = c.attach(args.session_id, args.ttl, on_event=lambda ev: print(
            json.dumps(jsonable(ev)) if args.json else f"event {describe_end(ev)}",
            flush=True))
        if not args.json:
            print(f"keeping session {session.id} alive; Ctrl-C stops", flush=True)
        while not stop.is_set() and not session.fenced.is_set():
            stop.wait(0.2)
        if session.fenced.is_set() and session.ended is not None:
            session.detach()
            ended = session.ended
            print(f"coord: {ended.type.upper()}: {describe_end(ended)}", file=sys.stderr)
            return EXIT_ERROR
        session.detach()
    return 0


async def _sessions_from_the_leader(admin: Any, endpoints: list[str]) -> Any:
    """Only the leader knows how long each session has left (it alone hears keepalives):
    ask the given endpoint that says it leads, else the leader's client address as the
    members know it, else any member (the times are then unknown)."""
    named = ""
    for endpoint in endpoints:
        try:
            status = await admin.status(endpoint)
        except CoordError:
            continue
        if status.role == "leader":
            return await admin.list_sessions(endpoint)
        named = named or next((m.client_address for m in status.members
                               if m.id == status.leader_id and m.client_address), "")
    return await admin.list_sessions(named or None)


@command
def cmd_session_list(args: argparse.Namespace) -> int:
    """Every session: its TTL, the time it has left on the leader, and what it holds."""
    resp = inspect_read(args, _sessions_from_the_leader)
    if args.json:
        print(json.dumps(message_dict(resp)), flush=True)
        return 0
    print_table(
        ("ID", "NAME", "TTL", "LEFT", "READ-ONLY OK", "OWNS", "KEYS"),
        ((s.id, s.name or "-", duration_ms(s.ttl_ms),
          duration_ms(s.remaining_ms) if s.remaining_ms >= 0 else "-",
          "yes" if s.read_only_ok else "no",
          " ".join(f"{o.group}/{o.resource}" for o in s.owned) or "-", len(s.keys))
         for s in resp.sessions),
        caption=f"{len(resp.sessions)} session(s) at revision {resp.revision}")
    print(f"time left as the leader {resp.member} counts it" if resp.leader else
          f"time left unknown: {resp.member} answered and is not the leader", flush=True)
    return 0


@command
def cmd_session_close(args: argparse.Namespace) -> int:
    with client(args) as c:
        header = c.close_session(args.session_id)
        emit(args, header, lambda: [f"session {args.session_id} closed"])
    return 0


def register(sub: Any) -> None:
    se = sub.add_parser("session", help="open, keep alive and close sessions")
    se_sub = se.add_subparsers(dest="session_command", required=True)
    p = add_command(se_sub, "open", cmd_session_open, cmd_session_open.__doc__ or "")
    p.add_argument("--name", default="coord-cli")
    p.add_argument("--ttl", type=float, default=10.0, help="seconds (default 10)")
    p = add_command(se_sub, "keepalive", cmd_session_keepalive,
                    cmd_session_keepalive.__doc__ or "")
    p.add_argument("session_id", type=int)
    p.add_argument("--ttl", type=float, default=10.0,
                   help="pace keepalives by this TTL until the server states it")
    add_command(se_sub, "list", cmd_session_list, cmd_session_list.__doc__ or "")
    p = add_command(se_sub, "close", cmd_session_close,
                    "close a session now (releases everything it holds)")
    p.add_argument("session_id", type=int)
