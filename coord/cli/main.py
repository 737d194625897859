"""`coord` command line: serve a member, run a local dev cluster, inspect, benchmark,
chaos-test, and use the client API (ownership, producer ids, KV, sessions).

This module only builds the parser and dispatches; each command lives in the module of
its job (`serve`, `dev`, `status`, `bench`, the `client_commands` package), which
registers its subparser with `register(subparsers)`."""

from __future__ import annotations

import argparse
import sys

SERVER_COMMANDS = ("serve", "dev", "status", "bench", "defrag", "snapshot", "chaos",
                   "tui", "certs")
CLIENT_COMMANDS = ("own", "release", "owners", "watch-owners", "pid", "kv", "session")
"""The names `coord.cli.client_commands.register` adds (tests/test_layout.py checks)."""
PIPELINE_COMMANDS = ("history", "audit")
"""The names `coord.cli.history.register` adds: the history export and its Spark audit."""


def _register(sub: argparse._SubParsersAction, command: str | None) -> None:
    """Register `command`'s subparser, or every command's when `command` is None.

    The command modules are imported here, and only the one about to run, to keep start-up
    light: `coord serve` (test rigs wait on its start-up) never loads the client commands,
    and the client commands never load the server (`serve`'s flags come from
    coord.serve_flags)."""
    if command in (None, "serve"):
        from coord.cli import serve

        serve.register(sub)
    if command in (None, "dev"):
        from coord.cli import dev

        dev.register(sub)
    if command in (None, "status"):
        from coord.cli import status

        status.register(sub)
    if command in (None, "defrag"):
        from coord.cli import defrag

        defrag.register(sub)
    if command in (None, "snapshot"):
        from coord.cli import snapshot

        snapshot.register(sub)
    if command in (None, "bench"):
        from coord.cli import bench

        bench.register(sub)
    if command in (None, "chaos"):
        from coord.chaos import cli as chaos

        chaos.register(sub)
    if command in (None, "tui"):
        from coord.cli import tui

        tui.register(sub)
    if command in (None, "certs"):
        from coord.cli import certs

        certs.register(sub)
    if command is None or command in PIPELINE_COMMANDS:
        from coord.cli import history

        history.register(sub)
    if command is None or command in CLIENT_COMMANDS:
        from coord.cli import client_commands

        client_commands.register(sub)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given the command about to run, only that command's
    part of it (see `_register`). An unknown command gets the whole parser, so its error
    lists every command."""
    p = argparse.ArgumentParser(prog="coord", description=__doc__.split("\n\n")[0])
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
