"""The `coord` CLI's client commands, one module per family: `own` (own, release, owners,
watch-owners), `pid`, `kv` (with `txn_script`, `coord kv txn`'s parser) and `session`;
`command` is what they share (common flags, the client, exits, Ctrl-C), `output` how
they print."""

from __future__ import annotations

from typing import Any

from coord.cli.client_commands import kv, own, pid, session


def register(sub: Any) -> None:
    for family in (own, pid, kv, session):
        family.register(sub)
