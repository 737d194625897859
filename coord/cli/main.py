"""`coord` command line: serve a member, run a local dev cluster, inspect, benchmark, and
use the client API (ownership, producer ids, KV, sessions)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:
    from coord.server.member import MemberConfig

SERVE_REQUIRED = ("name", "data_dir", "listen", "peer_listen", "initial_cluster")


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s.%(msecs)03d %(levelname)-5s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stdout,
    )


def _read_secret(args: argparse.Namespace) -> bytes:
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
    if len(secret) < 16:
        raise SystemExit(
            "coord: members authenticate each other with a shared secret of at least 16 bytes:"
            " pass --cluster-secret-file FILE or set COORD_CLUSTER_SECRET"
        )
    return secret


def member_config(args: argparse.Namespace) -> MemberConfig:
    """The MemberConfig that `coord serve ARGS` runs, for processes and in-process members
    alike (coord.testing.embedded). Bad arguments raise ValueError."""
    from coord.server.member import MemberConfig
    from coord.server.node.driver import NodeOptions
    from coord.server.node.members import parse_initial_cluster, validate_address

    missing = [f"--{a.replace('_', '-')}" for a in SERVE_REQUIRED if not getattr(args, a)]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --etcd-only for a throwaway member)")
    initial = parse_initial_cluster(args.initial_cluster)
    for address in (args.listen, args.peer_listen, *([args.etcd_listen] * bool(args.etcd_listen))):
        validate_address(address)
    options = NodeOptions(
        tick_ms=args.tick_ms,
        election_ticks=args.election_ticks,
        heartbeat_ticks=args.heartbeat_ticks,
        snapshot_every=args.snapshot_every,
    )
    return MemberConfig(
        name=args.name,
        data_dir=Path(args.data_dir),
        listen=args.listen,
        peer_listen=args.peer_listen,
        initial_cluster=initial,
        cluster_secret=_read_secret(args),
        options=options,
        join=args.initial_cluster_state == "existing",
        cluster_token=args.initial_cluster_token,
        read_only_mode=args.read_only_mode == "enabled",
        etcd_listen=args.etcd_listen,
        etcd_progress_notify_s=args.etcd_progress_notify_ms / 1000,
        etcd_only=args.etcd_only,
    )


def _etcd_only_defaults(args: argparse.Namespace) -> Path | None:
    """`--etcd-only` fills in a single throwaway member, as a bare `etcd` starts one: name
    `default`, clients on 127.0.0.1:2379, any free peer port, a fresh secret, and a temp
    data dir (returned, to be removed at exit) unless --data-dir is given."""
    from coord.testing.ports import free_port

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
    from coord.server.member import Member
    from coord.server.storage.log_store import StorageError

    _configure_logging(args.log_level)
    temp = _etcd_only_defaults(args) if args.etcd_only else None
    try:
        try:
            config = member_config(args)
        except ValueError as e:
            raise SystemExit(f"coord serve: {e}") from None

        async def run() -> int:
            return await Member(config).serve_until_signalled()

        try:
            return asyncio.run(run())
        except (StorageError, OSError, ValueError) as e:
            logging.getLogger("coord").error("%s: cannot start: %s", args.name, e)
            return 2
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def cmd_dev(args: argparse.Namespace) -> int:
    from coord.testing import ClusterError, LocalCluster

    data_dir = Path(args.data_dir)
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    colors = ["36", "33", "35", "32", "34", "31", "37", "96", "93"]

    def echo(name: str, line: str) -> None:
        color = colors[(int(name[1:]) - 1) % len(colors)]
        tag = f"\033[{color}m{name:>3}\033[0m" if sys.stdout.isatty() else f"{name:>3}"
        print(f"{tag} | {line}", flush=True)

    cluster = LocalCluster(
        args.nodes,
        data_dir=data_dir,
        base_port=args.base_port,
        echo=echo,
        extra_args=["--log-level", args.log_level],
    )
    stop = False

    def on_signal(signum, frame) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"coord dev: starting {args.nodes} members, data in {data_dir}/", flush=True)
    try:
        cluster.start(timeout=30)
        leader = cluster.wait_for_leader(timeout=30)
    except ClusterError as e:
        print(f"coord dev: {e}", file=sys.stderr)
        cluster.stop()
        return 1
    endpoints = ",".join(cluster.endpoints)
    print(
        f"coord dev: ready; leader {leader}. Client endpoints: {endpoints}\n"
        f"  try: coord status --endpoints {endpoints}\n"
        "  Ctrl-C stops the cluster (data is kept; --fresh starts over).",
        flush=True,
    )
    while not stop:
        dead = [m.name for m in cluster.members.values() if not m.running]
        if dead:
            print(f"coord dev: member(s) {', '.join(dead)} exited; stopping", file=sys.stderr)
            break
        time.sleep(0.2)
    print("coord dev: stopping members", flush=True)
    cluster.stop()
    print("coord dev: stopped", flush=True)
    return 0


def _status_row(endpoint: str, timeout: float) -> dict:
    from google.protobuf.json_format import MessageToDict

    from coord.client.admin import AdminClient

    try:
        with AdminClient(endpoint, timeout=timeout) as c:
            st = c.status()
    except grpc.RpcError as e:
        return {"endpoint": endpoint, "error": f"{e.code().name}: {e.details()}"}
    row = MessageToDict(
        st, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    row["endpoint"] = endpoint
    row["state_machine"] = json.loads(st.state_machine or "{}")
    return row


def cmd_status(args: argparse.Namespace) -> int:
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    rows = [_status_row(e, args.timeout) for e in endpoints]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        header = (
            "ENDPOINT", "NAME", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "QUORUM", "MODE"
        )
        table = [header]
        for r in rows:
            if "error" in r:
                table.append(
                    (r["endpoint"], "-", "unreachable", "-", "-", "-", "-", r["error"], "-")
                )
                continue
            quorum = "yes" if r["has_quorum"] else f"NO ({int(r['quorum_lost_ms']) / 1000:.1f}s)"
            table.append(
                (
                    r["endpoint"],
                    r["name"],
                    r["role"],
                    str(r["term"]),
                    r["leader_name"] or "-",
                    str(r["commit_index"]),
                    str(r["applied_index"]),
                    quorum,
                    r.get("mode") or "-",
                )
            )
        widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
        for row in table:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for r in rows:
            for p in r.get("progress", []):
                if p["name"] == r["name"]:
                    continue
                print(
                    f"  {r['name']} -> {p['name']}: match {p['match_index']} next"
                    f" {p['next_index']} {p['state']}{'' if p['recent_active'] else ' (inactive)'}"
                )
    return 0 if all("error" not in r for r in rows) else 1


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "readonly":
        from coord.bench.readonly import run_readonly_bench

        return run_readonly_bench(args)
    if args.target == "raft":
        from coord.bench.raft import run_raft_bench

        return run_raft_bench(args)
    if args.target == "etcd":
        from coord.bench.etcd import run_etcd_bench

        return run_etcd_bench(args)
    if args.target == "startup":
        from coord.bench.startup import run_startup_bench

        return run_startup_bench(args)
    from coord.bench.api import run_api_bench

    return run_api_bench(args)


def build_parser(client_commands: bool = True) -> argparse.ArgumentParser:
    """`client_commands=False` leaves out the client commands (and their imports), for
    `coord serve`, whose start-up time test rigs wait on."""
    p = argparse.ArgumentParser(prog="coord", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run one member")
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
    s.add_argument("--snapshot-every", type=int, default=20_000)
    s.add_argument(
        "--read-only-mode",
        choices=["enabled", "disabled"],
        default="enabled",
        help="without quorum, keep serving (stale, flagged) reads to read-only clients",
    )
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.set_defaults(func=cmd_serve)

    d = sub.add_parser("dev", help="run a local cluster on 127.0.0.1 (Ctrl-C stops it)")
    d.add_argument("--nodes", type=int, default=3)
    d.add_argument("--data-dir", default="data/dev")
    d.add_argument(
        "--base-port", type=int, default=7101, help="clients on BASE.., peers on BASE+100.."
    )
    d.add_argument("--fresh", action="store_true", help="wipe the data dir first")
    d.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    d.set_defaults(func=cmd_dev)

    st = sub.add_parser("status", help="each member's role, term, leader, indexes, quorum view")
    st.add_argument("--endpoints", required=True)
    st.add_argument("--json", action="store_true")
    st.add_argument("--timeout", type=float, default=2.0)
    st.set_defaults(func=cmd_status)

    b = sub.add_parser("bench", help="benchmarks")
    b.add_argument(
        "target",
        choices=["raft", "own", "pid", "kv", "etcd", "startup", "readonly"],
        help="etcd: coord and a real etcd 3.4 side by side (put, get, claim txns); "
        "startup: a fresh member's time to first served request, coord and etcd; "
        "readonly: read-only mode vs ZooKeeper 3.8",
    )
    b.add_argument("--resources", type=int, default=10_000, help="own: resources to claim")
    b.add_argument("--concurrency", default="1,16,256")
    b.add_argument("--seconds", type=float, default=5.0)
    b.add_argument("--failover-trials", type=int, default=10)
    b.add_argument("--claims", type=int, default=10_000, help="etcd: keys claimed per level")
    b.add_argument("--members", type=int, default=3, help="etcd: members per cluster")
    b.add_argument(
        "--trials", type=int, default=10, help="readonly, startup: trials per system and row"
    )
    b.add_argument(
        "--zk",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="readonly: also run ZooKeeper 3.8 (Debian's zookeeper + kazoo) side by side",
    )
    b.add_argument(
        "--survivor", default="follower,leader", help="readonly: which member survives"
    )
    b.add_argument("--zk-tick-ms", type=int, default=200, help="readonly: ZooKeeper tickTime")
    b.add_argument(
        "--zk-sync-limit",
        type=int,
        default=3,
        help="readonly: ZooKeeper syncLimit (ticks); x tickTime is its failure detection",
    )
    b.add_argument("--zk-init-limit", type=int, default=10, help="readonly: ZooKeeper initLimit")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)

    if client_commands:  # own, release, owners, watch-owners, pid, kv, session
        from coord.cli.client_commands import register as register_client_commands

        register_client_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(client_commands=argv[:1] != ["serve"]).parse_args(argv)
    return args.func(args)
