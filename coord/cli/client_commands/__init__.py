"""The `coord` CLI's client commands, one module per family: `own` (own, release, owners,
watch-owners), `pid`, `kv` (with `txn_script`, `coord kv txn`'s parser) and `session`;
`command` is what they share (common flags, the client, exits, Ctrl-C), `output` how
they print.

coord/cli/main.py registers them all with `register(subparsers)`, only when a client
command runs or the whole parser is built. Every command takes `--endpoints` (default
$COORD_ENDPOINTS, else the `coord dev` members) and `--json`. Failures print `coord:
REASON: message` on stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

from typing import Any

from coord.cli.client_commands import kv, own, pid, session


def register(sub: Any) -> None:
    for family in (own, pid, kv, session):
        family.register(sub)
