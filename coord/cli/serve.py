"""`coord serve`: run one member until SIGINT/SIGTERM. Its flags and their translation
into a MemberConfig live in coord.serve_flags, shared with every other way of starting a
member; what is the command line's own is `--etcd-only`'s throwaway defaults."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from coord.serve_flags import add_serve_flags, configure_logging, member_config


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("serve", help="run one member")
    add_serve_flags(s)
    s.set_defaults(func=cmd_serve)


def _etcd_only_defaults(args: argparse.Namespace) -> Path | None:
    """`--etcd-only` fills in a single throwaway member, as a bare `etcd` starts one: name
    `default`, clients on 127.0.0.1:2379, any free peer port, a fresh secret, and a temp
    data dir (returned, to be removed at exit) unless --data-dir is given."""
    from coord.testing.ports import free_port  # only --etcd-only needs it

    args.name = args.name or "default"
    args.listen = args.listen or "127.0.0.1:2379"
    args.peer_listen = args.peer_listen or f"127.0.0.1:{free_port()}"
    if not args.initial_cluster:
        args.initial_cluster = f"{args.name}={args.peer_listen}"
        if not args.cluster_secret_file and not os.environ.get("COORD_CLUSTER_SECRET"):
            os.environ["COORD_CLUSTER_SECRET"] = secrets.token_hex(32)  # nobody else joins
    if args.data_dir:
        return None
    temp = Path(tempfile.mkdtemp(prefix="coord-etcd-only-"))
    args.data_dir = str(temp / args.name)
    return temp


def cmd_serve(args: argparse.Namespace) -> int:
    # The server itself is imported here, not at the top, so `coord serve --help` and the
    # whole parser (`coord --help`) stay light.
    from coord import event_loop as loop
    from coord.server import failpoints
    from coord.server.member import Member
    from coord.server.node.errors import NodeError
    from coord.server.storage.log_store import StorageError

    configure_logging(args.log_level, args.log_format)
    temp = _etcd_only_defaults(args) if args.etcd_only else None
    try:
        try:
            config = member_config(args)
            armed = failpoints.arm_from_environment()
        except ValueError as e:
            raise SystemExit(f"coord serve: {e}") from None

        if armed:
            logging.getLogger("coord").warning("%s: failpoints armed (%s): %s", args.name,
                                               failpoints.ENV_VAR, ", ".join(armed))

        async def run() -> int:
            return await Member(config).serve_until_signalled()

        try:
            return loop.run(run(), args.event_loop)
        except (StorageError, NodeError, OSError, ValueError) as e:
            logging.getLogger("coord").error("%s: cannot start: %s", args.name, e)
            return 2
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
