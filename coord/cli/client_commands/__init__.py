"""The `coord` CLI's client commands, one module per family: `own` (own, release, owners,
watch-owners), `pid`, `kv` (with `txn_script`, `coord kv txn`'s parser), `session` and
`auth` (`coord auth`, `coord user`, `coord role`: etcd's users and roles);
`command` is what they share (common flags, the client, exits, Ctrl-C), `output` how
they print."""

from __future__ import annotations

from typing import Any

from coord.cli.client_commands import auth, kv, own, pid, session


def register(sub: Any) -> None:
    for family in (own, pid, kv, session, auth):
        family.register(sub)
