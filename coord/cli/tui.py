"""`coord tui`: the operator's console (coord/tui), live on a cluster's watch streams;
over TLS with `--cacert --cert --key` (or $COORD_CACERT...) and as `--user NAME[:PASSWORD]`
(or $COORD_USER, $COORD_PASSWORD) on a cluster with auth on, as every client command."""

from __future__ import annotations

import argparse
import asyncio
import sys

from coord.cli.client_commands.command import (
    add_tls_flags,
    add_user_flags,
    command,
    login_of,
    tls_of,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="a live k9s-style console: members, sessions, owners, "
                       "producer ids, keys, events")
    p.add_argument("--endpoints", required=True, help="host:port,host:port,...")
    p.add_argument("--read-only", action="store_true",
                   help="never change the cluster: every action is disabled")
    p.add_argument("--metrics-urls", default="",
                   help="http://HOST:PORT,... of the members' --listen-metrics-urls: the"
                   " :pulses view scrapes their /metrics")
    add_tls_flags(p)
    add_user_flags(p)
    p.set_defaults(func=cmd_tui)


@command
def cmd_tui(args: argparse.Namespace) -> int:
    try:
        from coord.tui.app import run
    except ImportError as e:  # textual is the `tui` extra
        print(f"coord tui needs the tui extra (pip install 'coord[tui]'): {e}", file=sys.stderr)
        return 2
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    if not endpoints:
        print("coord tui: --endpoints names no endpoint", file=sys.stderr)
        return 2
    metrics_urls = [u.strip() for u in args.metrics_urls.split(",") if u.strip()]
    asyncio.run(run(endpoints, read_only=args.read_only, tls=tls_of(args),
                    metrics_urls=metrics_urls, **login_of(args)))
    return 0
