"""`coord dev`: a local cluster of `coord serve` processes on 127.0.0.1 with their logs
interleaved on stdout, until Ctrl-C (what `make run` starts; `--tls`, `make run TLS=1`:
over TLS, with a CA and certificates kept in the data dir)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType

COLORS = ["36", "33", "35", "32", "34", "31", "37", "96", "93"]


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("dev", help="run a local cluster on 127.0.0.1 (Ctrl-C stops it)")
    d.add_argument("--nodes", type=int, default=3)
    d.add_argument("--data-dir", default="data/dev")
    d.add_argument(
        "--base-port", type=int, default=7101, help="clients on BASE.., peers on BASE+100.."
    )
    d.add_argument("--fresh", action="store_true", help="wipe the data dir first")
    d.add_argument("--tls", action="store_true",
                   help="TLS on both ports, client certificates required: a CA and"
                   " certificates in DATA_DIR/tls (made once, then reused)")
    d.add_argument("--metrics", action="store_true",
                   help="each member serves /metrics, /health, /livez and /readyz"
                   " (--listen-metrics-urls) on http://127.0.0.1:BASE+200..")
    d.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    d.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="the members' log lines: text, or one JSON object per line")
    d.set_defaults(func=cmd_dev)


def _echo(name: str, line: str) -> None:
    color = COLORS[(int(name[1:]) - 1) % len(COLORS)]
    tag = f"\033[{color}m{name:>3}\033[0m" if sys.stdout.isatty() else f"{name:>3}"
    print(f"{tag} | {line}", flush=True)


def cmd_dev(args: argparse.Namespace) -> int:
    # coord.testing (and with it the client library) is imported here, not at the top,
    # so building the whole parser (`coord --help`) stays light.
    from coord.testing import ClusterError, LocalCluster

    data_dir = Path(args.data_dir)
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    cluster = LocalCluster(
        args.nodes,
        data_dir=data_dir,
        base_port=args.base_port,
        echo=_echo,
        extra_args=["--log-level", args.log_level, "--log-format", args.log_format],
        tls=args.tls,
        metrics=args.metrics,
    )
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
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
    tls = cluster.client_tls
    flags = f" --cacert {tls.cacert} --cert {tls.cert} --key {tls.key}" if tls else ""
    print(
        f"coord dev: ready; leader {leader}. Client endpoints: {endpoints}\n"
        f"  try: coord status --endpoints {endpoints}{flags}\n"
        + (f"  TLS: clients give{flags} (etcdctl's flags too), or\n"
           f"  export COORD_CACERT={tls.cacert} COORD_CERT={tls.cert} COORD_KEY={tls.key}\n"
           if tls else "")
        + (f"  metrics: {' '.join(m.metrics_url + '/metrics' for m in cluster.members.values())}\n"
           if args.metrics else "")
        + "  Ctrl-C stops the cluster (data is kept; --fresh starts over).",
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
