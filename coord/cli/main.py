"""`coord` command line: serve a member, run a local dev cluster, inspect, benchmark,
chaos-test, and use the client API (ownership, producer ids, KV, sessions).

This module only builds the parser and dispatches; each command lives in the module of
its job (`serve`, `dev`, `status`, `bench`, the `client_commands` package), which
registers its subparser with `register(subparsers)`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

from coord.version import coord_version

SERVER_COMMANDS = ("serve", "dev", "status", "bench", "defrag", "snapshot", "chaos",
                   "tui", "certs")
CLIENT_COMMANDS = ("own", "release", "owners", "watch-owners", "pid", "kv", "session", "auth",
                   "user", "role")
"""The names `coord.cli.client_commands.register` adds (tests/test_layout.py checks)."""
PIPELINE_COMMANDS = ("history", "audit")
"""The names `coord.cli.history.register` adds: the history export and its Spark audit."""


_MODULES: tuple[tuple[tuple[str, ...], Callable[[], Any]], ...] = (
    (("serve",), lambda: import_module("coord.cli.serve")),
    (("dev",), lambda: import_module("coord.cli.dev")),
    (("status",), lambda: import_module("coord.cli.status")),
    (("defrag",), lambda: import_module("coord.cli.defrag")),
    (("snapshot",), lambda: import_module("coord.cli.snapshot")),
    (("bench",), lambda: import_module("coord.cli.bench")),
    (("chaos",), lambda: import_module("coord.chaos.cli")),
    (("tui",), lambda: import_module("coord.cli.tui")),
    (("certs",), lambda: import_module("coord.cli.certs")),
    (PIPELINE_COMMANDS, lambda: import_module("coord.cli.history")),
    (CLIENT_COMMANDS, lambda: import_module("coord.cli.client_commands")),
)
"""Each command module, by the commands it registers, in the order help lists them."""


def _register(sub: argparse._SubParsersAction, command: str | None) -> None:
    """Register `command`'s subparser, or every command's when `command` is None.

    The command modules are imported here, and only the one about to run, to keep start-up
    light: `coord serve` (test rigs wait on its start-up) never loads the client commands,
    and the client commands never load the server (`serve`'s flags come from
    coord.serve_flags)."""
    for commands, module in _MODULES:
        if command is None or command in commands:
            module().register(sub)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given the command about to run, only that command's
    part of it (see `_register`). An unknown command gets the whole parser, so its error
    lists every command."""
    p = argparse.ArgumentParser(prog="coord", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"coord {coord_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    known = command in (*SERVER_COMMANDS, *CLIENT_COMMANDS, *PIPELINE_COMMANDS)
    _register(sub, command if known else None)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":  # before anything loads gRPC: grpc_ciphers says why
        from coord.tls.grpc_ciphers import preset_grpc_ciphers

        preset_grpc_ciphers(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    return args.func(args)
