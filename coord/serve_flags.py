"""The `coord serve` command line: its flags (`add_serve_flags`), their translation into a
member's `MemberConfig` (`member_config`), the cluster secret they name and the log lines
they ask for. Bad input raises ValueError (a missing or malformed flag) or SystemExit
(the cluster secret), with a message that names the flag.

Every program that runs a member takes these same flags: `coord serve`, coord.testing's
in-process members (the flags a process would get, parsed here instead) and the raft
benchmark's member. So they live beside the layers, not in the CLI (coord.testing and
coord.bench may not import coord.cli: the CLI is built on them) and not in the server
(the member takes a MemberConfig and knows no command line; tests/test_layout.py keeps
argparse out of coord.server).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from coord.event_loop import EVENT_LOOPS
from coord.server.config import MemberConfig
from coord.server.node.driver import NodeOptions
from coord.server.node.members import parse_initial_cluster, validate_address
from coord.server.upkeep.compaction import DEFAULT_MODE, DEFAULT_RETENTION, MODES, CompactionPolicy
from coord.server.upkeep.quota import DEFAULT_QUOTA_BYTES

SERVE_REQUIRED = ("name", "data_dir", "listen", "peer_listen", "initial_cluster")
LOG_LEVELS = ["debug", "info", "warning", "error"]
MIN_SECRET_BYTES = 16


def add_serve_flags(s: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every `coord serve` flag, on `s` (the `serve` subcommand, or the parser of another
    entry point that runs a member); returns `s`."""
    s.add_argument(
        "--etcd-only",
        action="store_true",
        help="serve only the etcd v3 API (for etcd test rigs); every other flag is optional:"
        " a single member on 127.0.0.1:2379 with its data in a temp dir removed at exit",
    )
    s.add_argument("--name")
    s.add_argument("--data-dir")
    s.add_argument("--listen", help="client address HOST:PORT")
    s.add_argument("--peer-listen", help="peer address HOST:PORT")
    s.add_argument("--initial-cluster", help="n1=HOST:PEERPORT,n2=...")
    s.add_argument("--initial-cluster-state", choices=["new", "existing"], default="new")
    s.add_argument(
        "--initial-cluster-token",
        default="coord",
        help="names the cluster (its id); the same for every member, joiners included",
    )
    s.add_argument("--cluster-secret-file", help="file holding the shared cluster secret")
    s.add_argument(
        "--etcd-listen",
        default="",
        help="also serve the etcd v3 API on HOST:PORT (it is always on --listen)",
    )
    s.add_argument(
        "--etcd-progress-notify-ms",
        type=int,
        default=600_000,
        help="etcd watch progress notifications, for watchers that ask, at most this often",
    )
    s.add_argument("--tick-ms", type=int, default=50)
    s.add_argument("--election-ticks", type=int, default=12)
    s.add_argument("--heartbeat-ticks", type=int, default=2)
    s.add_argument(
        "--snapshot-every",
        type=int,
        default=20_000,
        help="snapshot after at least this many applied entries (default 20000), once the"
        " log since the last snapshot holds 4x its bytes, and after 5x this many at the"
        " latest",
    )
    s.add_argument(
        "--snapshot-bytes",
        type=int,
        default=64 << 20,
        help="also snapshot after this many bytes of log entries (default 64 MiB), so"
        " batched writes do not leave a long log to replay at restart",
    )
    s.add_argument(
        "--read-only-mode",
        choices=["enabled", "disabled"],
        default="enabled",
        help="without quorum, keep serving (stale, flagged) reads to read-only clients",
    )
    s.add_argument(
        "--auto-compaction-mode",
        choices=list(MODES),
        default=DEFAULT_MODE,
        help="etcd's: compact the KV and ownership history by age (periodic) or by count"
        " of revisions (revision)",
    )
    s.add_argument(
        "--auto-compaction-retention",
        default=DEFAULT_RETENTION,
        help="history to keep: periodic, hours or a duration (1, 5m, 30s); revision, a count"
        f" (100000); 0 turns auto-compaction off (default {DEFAULT_RETENTION})",
    )
    s.add_argument(
        "--quota-backend-bytes",
        type=int,
        default=DEFAULT_QUOTA_BYTES,
        help="etcd's: over this many bytes (state, or the store's log and snapshot), the"
        " member raises NOSPACE and writes that add state are refused until space is freed"
        " (default 2 GiB; 0: no quota)",
    )
    s.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    s.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=EVENT_LOOPS[0],
        help="the member's event loop: uvloop (faster; asyncio's if uvloop is not"
        " installed) or asyncio's own",
    )
    return s


def configure_logging(level: str) -> None:
    """A member's log lines on stdout (test rigs and `coord dev` read them there)."""
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s.%(msecs)03d %(levelname)-5s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stdout,
    )


def read_secret(args: argparse.Namespace) -> bytes:
    """The cluster secret from --cluster-secret-file, else $COORD_CLUSTER_SECRET; exits
    with a message saying how to give one when it is missing or too short."""
    if args.cluster_secret_file:
        path = Path(args.cluster_secret_file)
        try:
            secret = path.read_bytes().strip()
        except OSError as e:
            raise SystemExit(
                f"coord: cannot read --cluster-secret-file {path}: {e.strerror}"
            ) from None
    else:
        secret = os.environ.get("COORD_CLUSTER_SECRET", "").encode()
    if len(secret) < MIN_SECRET_BYTES:
        raise SystemExit(
            "coord: members authenticate each other with a shared secret of at least 16 bytes:"
            " pass --cluster-secret-file FILE or set COORD_CLUSTER_SECRET"
        )
    return secret


def member_config(args: argparse.Namespace) -> MemberConfig:
    """The MemberConfig that `coord serve ARGS` runs, for processes and in-process members
    alike (coord.testing.embedded). Bad arguments raise ValueError."""
    missing = [f"--{a.replace('_', '-')}" for a in SERVE_REQUIRED if not getattr(args, a)]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --etcd-only for a throwaway member)")
    initial = parse_initial_cluster(args.initial_cluster)
    for address in (args.listen, args.peer_listen, *([args.etcd_listen] * bool(args.etcd_listen))):
        validate_address(address)
    if args.snapshot_bytes < 1 or args.snapshot_every < 1:
        raise ValueError("--snapshot-every and --snapshot-bytes must be positive")
    if args.quota_backend_bytes < 0:
        raise ValueError("--quota-backend-bytes must be >= 0 (0: no quota)")
    options = NodeOptions(
        tick_ms=args.tick_ms,
        election_ticks=args.election_ticks,
        heartbeat_ticks=args.heartbeat_ticks,
        snapshot_every=args.snapshot_every,
        snapshot_bytes=args.snapshot_bytes,
    )
    return MemberConfig(
        name=args.name,
        data_dir=Path(args.data_dir),
        listen=args.listen,
        peer_listen=args.peer_listen,
        initial_cluster=initial,
        cluster_secret=read_secret(args),
        options=options,
        join=args.initial_cluster_state == "existing",
        cluster_token=args.initial_cluster_token,
        read_only_mode=args.read_only_mode == "enabled",
        etcd_listen=args.etcd_listen,
        etcd_progress_notify_s=args.etcd_progress_notify_ms / 1000,
        etcd_only=args.etcd_only,
        quota_bytes=args.quota_backend_bytes,
        compaction=CompactionPolicy.parse(args.auto_compaction_mode,
                                          args.auto_compaction_retention),
    )


def parse_serve_args(argv: list[str]) -> argparse.Namespace:
    """`argv` (the flags after `coord serve`) parsed exactly as `coord serve` parses them."""
    return add_serve_flags(argparse.ArgumentParser(prog="coord serve")).parse_args(argv)
